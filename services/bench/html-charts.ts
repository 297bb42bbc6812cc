/*
 * Inline SVG charts for the bench's HTML page (html-report.ts): strings, no script, no
 * external resource. Every text that reaches the markup goes through `escapeHtml`.
 */

/** Escapes text for HTML element content and double- or single-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** Colours of the series, in order; a chart with more series repeats them. */
export const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#64748b'];
const colour = (i: number) => PALETTE[i % PALETTE.length]!;

export interface LineSeries {
  name: string;
  points: ReadonlyArray<readonly [number, number]>;
}

export interface LineChartOptions {
  /** The chart's accessible title (also its `aria-label`). */
  title: string;
  xLabel: string;
  yLabel: string;
  /** A logarithmic x axis (latencies); its values must be positive. */
  xLog?: boolean;
  /** Steps rather than straight segments between points (cumulative shares). */
  step?: boolean;
  yMax?: number;
  /** The `data-chart` attribute, for tests and readers of the page. */
  id: string;
}

const W = 640;
const H = 260;
const M = { left: 56, right: 12, top: 12, bottom: 40 };

const fmt = (v: number) => (Math.abs(v) >= 1000 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v * 100) / 100));

/** "Nice" ticks from 0 to at least `max`. */
function linearTicks(max: number): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? raw;
  const ticks: number[] = [];
  for (let v = 0; v < max + step / 2; v += step) ticks.push(v);
  if (ticks.at(-1)! < max) ticks.push(ticks.at(-1)! + step);
  return ticks;
}

/** Powers of ten covering [min, max]. */
function logTicks(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) ticks.push(10 ** e);
  return ticks;
}

/** A line chart of one or more series, with axes, ticks and a legend; an empty chart says so. */
export function lineChart(series: readonly LineSeries[], o: LineChartOptions): string {
  const all = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.xLog || x > 0));
  const head = `<svg class="chart" data-chart="${escapeHtml(o.id)}" role="img" aria-label="${escapeHtml(o.title)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}"><title>${escapeHtml(o.title)}</title>`;
  if (all.length === 0) return `${head}<text x="${W / 2}" y="${H / 2}" text-anchor="middle">no data</text></svg>`;
  const xs = all.map(([x]) => x);
  const xTicks = o.xLog ? logTicks(Math.min(...xs), Math.max(...xs)) : linearTicks(Math.max(...xs));
  const yTicks = linearTicks(o.yMax ?? Math.max(...all.map(([, y]) => y)));
  const [x0, x1] = [xTicks[0]!, xTicks.at(-1)!];
  const y1 = yTicks.at(-1)!;
  const px = (x: number) =>
    M.left +
    ((o.xLog ? Math.log10(x) - Math.log10(x0) : x - x0) / (o.xLog ? Math.log10(x1) - Math.log10(x0) || 1 : x1 - x0 || 1)) *
      (W - M.left - M.right);
  const py = (y: number) => H - M.bottom - (y / (y1 || 1)) * (H - M.top - M.bottom);
  const parts: string[] = [head];
  for (const t of yTicks)
    parts.push(
      `<line class="grid" x1="${M.left}" x2="${W - M.right}" y1="${py(t).toFixed(1)}" y2="${py(t).toFixed(1)}"/><text class="tick" x="${M.left - 4}" y="${(py(t) + 4).toFixed(1)}" text-anchor="end">${fmt(t)}</text>`,
    );
  for (const t of xTicks)
    parts.push(`<text class="tick" x="${px(t).toFixed(1)}" y="${H - M.bottom + 14}" text-anchor="middle">${fmt(t)}</text>`);
  parts.push(`<text class="axis" x="${(M.left + W - M.right) / 2}" y="${H - 6}" text-anchor="middle">${escapeHtml(o.xLabel)}</text>`);
  parts.push(
    `<text class="axis" transform="translate(12 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${escapeHtml(o.yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.xLog || x > 0));
    if (pts.length === 0) return;
    let d = `M${px(pts[0]![0]).toFixed(1)},${py(pts[0]![1]).toFixed(1)}`;
    for (let k = 1; k < pts.length; k++) {
      const [x, y] = pts[k]!;
      d += o.step ? `H${px(x).toFixed(1)}V${py(y).toFixed(1)}` : `L${px(x).toFixed(1)},${py(y).toFixed(1)}`;
    }
    parts.push(`<path class="series" data-series="${escapeHtml(s.name)}" d="${d}" stroke="${colour(i)}" fill="none" stroke-width="2"/>`);
    const ly = M.top + 4 + i * 14;
    parts.push(
      `<rect x="${W - M.right - 170}" y="${ly}" width="10" height="10" fill="${colour(i)}"/><text class="legend" x="${W - M.right - 156}" y="${ly + 9}">${escapeHtml(s.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('');
}

export interface StackedBar {
  label: string;
  /** One value per segment name, in the chart's order; null: not measured. */
  values: ReadonlyArray<number | null>;
}

/** Horizontal stacked bars (CPU per handoff by process kind), each labelled with its total. */
export function stackedBars(
  bars: readonly StackedBar[],
  segments: readonly string[],
  o: { title: string; unit: string; id: string },
): string {
  const rowH = 26;
  const legendH = 20;
  const labelW = 250;
  const height = M.top + legendH + bars.length * rowH + 30;
  const max = Math.max(0, ...bars.map((b) => b.values.reduce<number>((a, v) => a + (v ?? 0), 0)));
  const ticks = linearTicks(max);
  const scale = (v: number) => (v / (ticks.at(-1)! || 1)) * (W - labelW - M.right - 50);
  const parts = [
    `<svg class="chart" data-chart="${escapeHtml(o.id)}" role="img" aria-label="${escapeHtml(o.title)}" viewBox="0 0 ${W} ${height}" width="${W}" height="${height}"><title>${escapeHtml(o.title)}</title>`,
  ];
  let lx = 4;
  segments.forEach((name, i) => {
    parts.push(
      `<rect x="${lx}" y="${M.top}" width="10" height="10" fill="${colour(i)}"/><text class="legend" x="${lx + 14}" y="${M.top + 9}">${escapeHtml(name)}</text>`,
    );
    lx += 24 + name.length * 6.5;
  });
  bars.forEach((b, row) => {
    const y = M.top + legendH + row * rowH;
    parts.push(`<text class="tick" x="${labelW - 6}" y="${y + 15}" text-anchor="end">${escapeHtml(b.label)}</text>`);
    let x = labelW;
    b.values.forEach((v, i) => {
      if (v === null || v <= 0) return;
      const w = scale(v);
      parts.push(
        `<rect class="segment" data-segment="${escapeHtml(segments[i] ?? '')}" data-value="${v}" x="${x.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${colour(i)}"><title>${escapeHtml(`${segments[i] ?? ''}: ${v} ${o.unit}`)}</title></rect>`,
      );
      x += w;
    });
    const total = b.values.reduce<number>((a, v) => a + (v ?? 0), 0);
    parts.push(`<text class="tick" x="${(x + 4).toFixed(1)}" y="${y + 15}">${fmt(total)} ${escapeHtml(o.unit)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('');
}
