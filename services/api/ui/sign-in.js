// Trades a bearer token for a browser session (an HttpOnly cookie): POST /ui/session.
const form = document.getElementById('sign-in');
const error = document.getElementById('error');

/** Baton's own pages a sign-in may lead to. */
const OWN_PAGES = ['/ui/', '/admin/queues'];

/**
 * Only one of Baton's own pages on this site: never send a signed-in browser elsewhere. `next`
 * is resolved against this page's origin exactly as the browser would follow it (so `/\evil`,
 * which browsers read as `//evil`, names another origin) and kept only when the origin is
 * unchanged and the path is under Baton's pages.
 */
function nextPath() {
  const next = new URLSearchParams(location.search).get('next');
  if (!next) return '/ui/';
  let target;
  try {
    target = new URL(next, location.origin);
  } catch {
    return '/ui/';
  }
  const own = target.origin === location.origin && (target.pathname === '/ui' || OWN_PAGES.some((p) => target.pathname.startsWith(p)));
  return own ? `${target.pathname}${target.search}${target.hash}` : '/ui/';
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  error.hidden = true;
  const token = form.elements.token.value.trim();
  const res = await fetch('/ui/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  if (res.ok) {
    location.assign(nextPath());
    return;
  }
  const body = await res.json().catch(() => null);
  error.textContent = body?.error?.message ?? `sign-in failed (${res.status})`;
  error.hidden = false;
});
