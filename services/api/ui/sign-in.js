// Trades a bearer token for a browser session (an HttpOnly cookie): POST /ui/session.
const form = document.getElementById('sign-in');
const error = document.getElementById('error');

/** Only a path on this site: never send a signed-in browser elsewhere. */
function nextPath() {
  const next = new URLSearchParams(location.search).get('next');
  return next && next.startsWith('/') && !next.startsWith('//') ? next : '/ui/';
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  error.hidden = true;
  const token = form.elements.token.value.trim();
  const res = await fetch('/ui/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
  if (res.ok) {
    location.assign(nextPath());
    return;
  }
  const body = await res.json().catch(() => null);
  error.textContent = body?.error?.message ?? `sign-in failed (${res.status})`;
  error.hidden = false;
});
