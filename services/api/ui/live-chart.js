// The live page's chart of the last hour, drawn as inline SVG from GET /v1/live's `perMinute`
// (no library, no external asset: the page's CSP allows none). Every bar and point carries its
// figures as data-* attributes and a <title>, so a reader (or a test) can check what is drawn.

const SVG = 'http://www.w3.org/2000/svg';
const W = 600;
const H = 100;
/** Stacking order, bottom up: what went well first. */
export const OUTCOMES = ['RETURNED', 'ACKNOWLEDGED', 'CANCELLED', 'DUPLICATE', 'UNAVAILABLE', 'FAILED'];

function svg(tag, attrs = {}, tip) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (tip !== undefined) {
    const title = document.createElementNS(SVG, 'title');
    title.textContent = tip;
    node.append(title);
  }
  return node;
}

const clock = (iso) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
const ms = (v) => (v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`);

/** Stacked bars: handoffs settled per minute, by the state they settled in; a legend of the hour's totals. */
export function drawSettled(target, legend, minutes) {
  const slot = W / minutes.length;
  const totals = Object.fromEntries(OUTCOMES.map((o) => [o, 0]));
  const most = Math.max(1, ...minutes.map((m) => Object.values(m.settled).reduce((a, b) => a + b, 0)));
  const bars = [];
  minutes.forEach((m, i) => {
    let y = H;
    for (const outcome of OUTCOMES) {
      const n = m.settled[outcome] ?? 0;
      if (n === 0) continue;
      totals[outcome] += n;
      const h = (n / most) * (H - 4);
      y -= h;
      bars.push(
        svg(
          'rect',
          {
            class: 'bar',
            'data-state': outcome,
            'data-minute': m.at,
            'data-count': n,
            x: i * slot + 1,
            y,
            width: Math.max(1, slot - 2),
            height: h,
          },
          `${clock(m.at)} · ${outcome} ${n}`,
        ),
      );
    }
  });
  target.replaceChildren(svg('line', { class: 'axis', x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5 }), ...bars);
  target.setAttribute('data-max', String(most));
  legend.replaceChildren(
    ...OUTCOMES.filter((o) => totals[o] > 0).map((o) => {
      const item = document.createElement('span');
      item.className = 'key';
      item.setAttribute('data-state', o);
      item.setAttribute('data-count', String(totals[o]));
      item.textContent = `${o.toLowerCase()} ${totals[o]}`;
      return item;
    }),
  );
  if (!legend.firstChild) legend.textContent = 'nothing settled in the last hour';
}

/** p50 and p90 of send → returned per minute, as two lines over the minutes that had returns. */
export function drawTimes(target, maxLabel, minutes) {
  const slot = W / minutes.length;
  const points = minutes.map((m, i) => ({ m, x: i * slot + slot / 2 })).filter((p) => p.m.returned.count > 0);
  const most = Math.max(1, ...points.map((p) => p.m.returned.p90Ms ?? 0));
  const y = (v) => H - 2 - (v / most) * (H - 6);
  const children = [svg('line', { class: 'axis', x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5 })];
  for (const key of ['p90', 'p50']) {
    const field = `${key}Ms`;
    if (points.length > 1)
      children.push(svg('polyline', { class: `line ${key}`, points: points.map((p) => `${p.x},${y(p.m.returned[field])}`).join(' ') }));
    for (const p of points) {
      children.push(
        svg(
          'circle',
          {
            class: `dot ${key}`,
            cx: p.x,
            cy: y(p.m.returned[field]),
            r: 2.5,
            'data-minute': p.m.at,
            'data-ms': p.m.returned[field],
            'data-count': p.m.returned.count,
          },
          `${clock(p.m.at)} · ${key} ${ms(p.m.returned[field])} over ${p.m.returned.count}`,
        ),
      );
    }
  }
  target.replaceChildren(...children);
  maxLabel.textContent = points.length ? `· top ${ms(most)}` : '· none returned in the last hour';
}
