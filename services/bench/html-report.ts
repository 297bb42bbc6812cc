import type { BenchResult } from './bench-result.ts';
import { escapeHtml, lineChart, stackedBars, type LineSeries, type StackedBar } from './html-charts.ts';
import type { LatencyHistogram } from './plot-data.ts';
import { renderReport } from './report.ts';
import type { UsagePerHandoff } from './usage.ts';

/** The process kinds of the CPU chart, in the order of its segments. */
const CPU_ROLES = [
  ['api', 'API'],
  ['workers', 'workers'],
  ['postgres', 'Postgres'],
  ['redis', 'Redis'],
  ['demoHost', 'demo host'],
  ['loadGenerator', 'load generator'],
] as const;

/**
 * Points of the cumulative distribution of a histogram: [bucket bound, share of values at most
 * that bound], from the first non-empty bucket to the first bound that holds all of them (what
 * lies above the last bound stays off the chart, so the line ends below 1).
 */
export function cumulativeShares(h: LatencyHistogram): Array<[number, number]> {
  const total = h.counts.reduce((a, b) => a + b, 0);
  if (total === 0) return [];
  const points: Array<[number, number]> = [];
  let seen = 0;
  for (let i = 0; i < h.boundsMs.length; i++) {
    seen += h.counts[i] ?? 0;
    if (seen === 0) {
      // The bound below the first value: where the line starts at 0.
      if ((h.counts[i + 1] ?? 0) > 0) points.push([h.boundsMs[i]!, 0]);
      continue;
    }
    points.push([h.boundsMs[i]!, seen / total]);
    if (seen === total) break;
  }
  return points;
}

/** Points of a per-second series: [second, count]. */
const perSecondPoints = (counts: readonly number[]): Array<[number, number]> => counts.map((n, s) => [s, n]);

function latencyChart(id: string, title: string, series: Array<[string, LatencyHistogram | undefined]>): string {
  const lines: LineSeries[] = series.filter(([, h]) => h).map(([name, h]) => ({ name, points: cumulativeShares(h!) }));
  return figure(
    title,
    lineChart(lines, {
      id,
      title,
      xLabel: 'latency, ms (log scale)',
      yLabel: 'share of handoffs at most',
      xLog: true,
      step: true,
      yMax: 1,
    }),
  );
}

function figure(caption: string, svg: string): string {
  return `<figure>${svg}<figcaption>${escapeHtml(caption)}</figcaption></figure>`;
}

function latencySection(r: BenchResult): string {
  const charts: string[] = [];
  if (r.send)
    charts.push(
      latencyChart('latency-send', 'send over HTTP: request latency', [
        ['1 client', r.send.oneClient.latency],
        ['32 clients', r.send.thirtyTwoClients.latency],
      ]),
    );
  for (const d of r.delivery ?? []) {
    const l = d.series?.latency;
    charts.push(
      latencyChart(`latency-e2e-${d.agents}`, `e2e ${d.agents} agents, ${d.handoffs} handoffs: from commit`, [
        ['dispatch (adapter call)', l?.dispatch],
        ['ACCEPTED', l?.accepted],
        ['RETURNED', l?.returned],
      ]),
    );
  }
  const lat = r.dispatchLatency;
  if (lat) {
    const l = lat.series?.latency;
    charts.push(
      latencyChart('latency-steady', `steady ${lat.perSecond}/s to ${lat.agents} idle agents: from commit`, [
        ['dispatch (adapter call)', l?.dispatch],
        ['ACCEPTED', l?.accepted],
        ['RETURNED', l?.returned],
      ]),
    );
  }
  if (r.capacity)
    charts.push(
      latencyChart(
        'latency-capacity',
        `capacity runs (${r.capacity.runs[0]?.agents ?? '?'} agents): commit to RETURNED`,
        r.capacity.runs.map((c) => [`${c.workers} worker${c.workers === 1 ? '' : 's'}`, c.series?.latency.returned]),
      ),
    );
  return section('latency', 'Latency distributions', charts, 'Each line: the share of handoffs (or requests) at most that latency.');
}

function throughputSection(r: BenchResult): string {
  const charts: string[] = [];
  const options = (id: string, title: string) => ({ id, title, xLabel: 'seconds from the first commit', yLabel: 'handoffs per second' });
  for (const d of r.delivery ?? []) {
    const p = d.series?.perSecond;
    const title = `e2e ${d.agents} agents: committed and RETURNED per second`;
    const lines = p
      ? [
          { name: 'committed', points: perSecondPoints(p.sent) },
          { name: 'RETURNED', points: perSecondPoints(p.returned) },
        ]
      : [];
    charts.push(figure(title, lineChart(lines, options(`throughput-e2e-${d.agents}`, title))));
  }
  if (r.capacity) {
    const title = 'capacity runs: RETURNED per second, by worker processes';
    const lines = r.capacity.runs.map((c) => ({
      name: `${c.workers} worker${c.workers === 1 ? '' : 's'}`,
      points: perSecondPoints(c.series?.perSecond.returned ?? []),
    }));
    charts.push(figure(title, lineChart(lines, options('throughput-capacity', title))));
  }
  return section(
    'throughput',
    'Throughput over time',
    charts,
    'Counted per whole second from the run’s first commit (Postgres timestamps).',
  );
}

const bar = (label: string, u: UsagePerHandoff): StackedBar => ({ label, values: CPU_ROLES.map(([role]) => u.cpuMs[role]) });

function cpuSection(r: BenchResult): string {
  const bars: StackedBar[] = [];
  if (r.send) bars.push(bar('send, 32 clients', r.send.thirtyTwoClientsCost));
  for (const d of r.delivery ?? []) {
    bars.push(bar(`e2e ${d.agents} agents`, d.perHandoff));
    if (d.warmUp) bars.push(bar(`  warm-up: first ${d.warmUp.handoffs} handoffs`, d.warmUp.perHandoff));
  }
  for (const c of r.capacity?.runs ?? []) bars.push(bar(`capacity, ${c.workers} worker${c.workers === 1 ? '' : 's'}`, c.perHandoff));
  const title = 'CPU ms per handoff, by process';
  const chart =
    bars.length > 0
      ? figure(
          title,
          stackedBars(
            bars,
            CPU_ROLES.map(([, name]) => name),
            { id: 'cpu-per-handoff', title, unit: 'ms' },
          ),
        )
      : '';
  return section(
    'cpu',
    'CPU per handoff by process',
    chart ? [chart] : [],
    'From /proc over each run’s measured window; n/a parts (a shared server) are left out.',
  );
}

function section(id: string, title: string, body: string[], note: string): string {
  if (body.length === 0) return '';
  return `<section id="${id}"><h2>${escapeHtml(title)}</h2><p class="note">${escapeHtml(note)}</p>${body.join('')}</section>`;
}

const metCell = (met: boolean | null) =>
  met === null ? '<td class="met na">n/a</td>' : met ? '<td class="met yes">yes</td>' : '<td class="met no">NO</td>';

function rowsTable(
  id: string,
  title: string,
  rows: ReadonlyArray<{ name: string; goal: string; measured: string; met: boolean | null }>,
): string {
  if (rows.length === 0) return '';
  const body = rows
    .map((t) => `<tr><td>${escapeHtml(t.name)}</td><td>${escapeHtml(t.goal)}</td><td>${escapeHtml(t.measured)}</td>${metCell(t.met)}</tr>`)
    .join('');
  return `<section id="${id}"><h2>${escapeHtml(title)}</h2><table><thead><tr><th>${escapeHtml(id === 'targets' ? 'target' : 'guarantee')}</th><th>goal</th><th>measured</th><th>met</th></tr></thead><tbody>${body}</tbody></table></section>`;
}

const fix = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '∞');

function capacitySection(r: BenchResult): string {
  const c = r.capacity;
  if (!c) return '';
  const rows = c.runs
    .map((run) => {
      const p = run.prediction;
      const pg = run.postgres.cores;
      if (!p)
        return `<tr><td>${run.workers}</td><td>${run.returnedPerSec}/s</td><td colspan="5">n/a (a shared Postgres or Redis: CPU unknown)</td><td class="met na">n/a</td></tr>`;
      return `<tr><td>${run.workers}</td><td>${run.returnedPerSec}/s</td><td>${fix(p.handoffsPerSec.low)}-${fix(p.handoffsPerSec.high)}/s (${fix(p.handoffsPerSec.mid)})</td><td>${escapeHtml(p.limitedBy)}</td><td>${pg === null ? 'n/a' : fix(pg, 2)}</td><td>${fix(p.postgres.cores.low, 2)}-${fix(p.postgres.cores.high, 2)}</td><td>${run.otherCores === null ? 'n/a' : fix(run.otherCores, 2)}</td>${metCell(run.withinBand.postgres === null ? run.withinBand.throughput : run.withinBand.throughput === true && run.withinBand.postgres)}</tr>`;
    })
    .join('');
  return `<section id="capacity"><h2>Capacity model on this host</h2><p class="note">${escapeHtml(
    `Predicted from the ${c.calibration.workers}-worker run's CPU per handoff and the cores the host had free (${c.cores} cores less other work); docs/CAPACITY.md.`,
  )}</p><table><thead><tr><th>workers</th><th>to RETURNED</th><th>predicted</th><th>limited by</th><th>Postgres cores</th><th>predicted</th><th>other work, cores</th><th>within</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

/** JSON for a `<script type="application/json">` element: nothing in it can close the element or start markup. */
export function embeddedJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

const STYLE = `body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111;max-width:1320px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6}.met.yes{color:#166534}.met.no{color:#b91c1c;font-weight:bold}.met.na{color:#6b7280}.note{color:#4b5563}
figure{display:inline-block;margin:8px 16px 8px 0}figcaption{color:#4b5563;font-size:12px}svg.chart{background:#fff;border:1px solid #e5e7eb}
svg .grid{stroke:#e5e7eb}svg text{font-size:11px;fill:#374151}svg .axis{font-size:12px}pre{background:#f9fafb;padding:8px;overflow:auto;font-size:12px}`;

/**
 * The bench's HTML page (`--html FILE`): one self-contained document, with inline SVG plots
 * (latency distributions per scenario, throughput over time, CPU per handoff by process), the
 * targets and guarantees as goal / measured / met, the capacity model's prediction beside the
 * measurement, the text report, and the whole result as JSON (`#bench-result`). No script runs
 * and nothing is fetched: its Content-Security-Policy allows no source at all.
 */
export function renderHtmlReport(r: BenchResult): string {
  const title = `Baton benchmark (${r.mode}${r.only ? `, only ${r.only.join(', ')}` : ''}), ${r.startedAt}`;
  const m = r.machine;
  const machine = `${r.seconds} s; ${m.cpus} cores, Node ${m.node}, Postgres ${m.postgres}${m.embeddedPostgres ? ' (embedded)' : ''}, Redis ${m.redis}${m.embeddedRedis ? ' (private)' : ''}`;
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>`,
    `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(machine)}</p>`,
    rowsTable('targets', 'Targets', r.targets),
    rowsTable('guarantees', 'Guarantees', r.guarantees),
    capacitySection(r),
    latencySection(r),
    throughputSection(r),
    cpuSection(r),
    `<section id="report"><h2>The text report</h2><pre>${escapeHtml(renderReport(r))}</pre></section>`,
    `<script type="application/json" id="bench-result">${embeddedJson(r)}</script>`,
    '</body></html>',
    '',
  ].join('\n');
}
