import { describe, expect, it } from 'vitest';
import { escapeHtml } from '../../services/bench/html-charts.ts';
import { cumulativeShares, embeddedJson, renderHtmlReport } from '../../services/bench/html-report.ts';
import { LATENCY_BOUNDS_MS, latencyHistogram, perSecondCounts } from '../../services/bench/plot-data.ts';
import { delivery, fixture } from '../support/bench-result-fixture.ts';

/** Open and close tags pair up (void elements aside): a well-formed page the browser need not repair. */
function unbalancedTags(html: string): string[] {
  const body = html.replace(/<script type="application\/json"[^>]*>[\s\S]*?<\/script>/, '').replace(/<!doctype html>/i, '');
  const voids = new Set(['meta', 'br', 'hr', 'img', 'input', 'link']);
  const stack: string[] = [];
  const problems: string[] = [];
  for (const m of body.matchAll(/<(\/?)([a-zA-Z][\w-]*)[^>]*?(\/?)>/g)) {
    const [, closing, name, selfClosing] = m;
    const tag = name!.toLowerCase();
    if (selfClosing || (voids.has(tag) && !closing)) continue;
    if (!closing) stack.push(tag);
    else if (stack.pop() !== tag) problems.push(`</${tag}>`);
  }
  return [...problems, ...stack.map((t) => `<${t}> not closed`)];
}

describe('the bench’s HTML page', () => {
  const html = renderHtmlReport(fixture);

  it('is one self-contained document: no script to run, nothing fetched, a policy that allows no source', () => {
    expect(html.startsWith('<!doctype html>\n<html lang="en">')).toBe(true);
    expect(html.trimEnd().endsWith('</html>')).toBe(true);
    expect(html).toContain(`content="default-src 'none'; style-src 'unsafe-inline'"`);
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/<link\b|<img\b|<iframe\b|<[^>]*\ssrc=|@import|url\(/i);
    // The only script element holds data, not code.
    expect([...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0])).toEqual(['<script type="application/json" id="bench-result">']);
    expect(unbalancedTags(html)).toEqual([]);
  });

  it('carries the whole result as JSON that reads back unchanged', () => {
    const json = /<script type="application\/json" id="bench-result">([\s\S]*?)<\/script>/.exec(html)![1]!;
    expect(JSON.parse(json)).toEqual(JSON.parse(JSON.stringify(fixture)));
    expect(embeddedJson({ s: '</script><!-- & \u2028' })).toBe('{"s":"\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028"}');
  });

  it('escapes every text it shows', () => {
    expect(escapeHtml(`<a href='x'>&"`)).toBe('&#60;a href=&#39;x&#39;&#62;&#38;&#34;');
    expect(html).toContain('CPU &#60;per&#62; handoff &#38; &#34;more&#34; &#60;img src=x onerror=alert(1)&#62;');
    expect(html).not.toContain('<img src=x');
    expect(html).not.toContain('<b>bold</b>');
    expect(html).toContain('busy agents: &#60;/script&#62;&#60;b&#62;bold&#60;/b&#62;');
  });

  it('shows every target as goal, measured and met (yes, NO, n/a)', () => {
    const rows = /<section id="targets">([\s\S]*?)<\/section>/.exec(html)![1]!;
    expect(rows).toContain('<td>&#62;= 1000/s</td><td>900/s</td><td class="met no">NO</td>');
    expect(rows).toContain('<td>&#60;= 1.5 ms</td><td>1.2 ms</td><td class="met yes">yes</td>');
    expect(rows).toContain('<td>n/a</td><td class="met na">n/a</td>');
  });

  it('plots latency per scenario, throughput over time and CPU per handoff by process from the result’s data', () => {
    const charts = [...html.matchAll(/data-chart="([^"]+)"/g)].map((m) => m[1]);
    expect(charts).toEqual([
      'latency-send',
      'latency-e2e-10',
      'latency-capacity',
      'throughput-e2e-10',
      'throughput-capacity',
      'cpu-per-handoff',
    ]);
    const e2e = /data-chart="latency-e2e-10"[\s\S]*?<\/svg>/.exec(html)![0];
    expect([...e2e.matchAll(/data-series="([^"]+)"/g)].map((m) => m[1])).toEqual(['dispatch (adapter call)', 'ACCEPTED', 'RETURNED']);
    const cpu = /data-chart="cpu-per-handoff"[\s\S]*?<\/svg>/.exec(html)![0];
    // One bar per measured window: the send, the e2e run, its warm-up, the capacity run; the workers' segment carries its value.
    expect([...cpu.matchAll(/data-segment="workers" data-value="([\d.]+)"/g)].map((m) => Number(m[1]))).toEqual([0.8, 2.4, 0.8]);
    expect(html).toContain('warm-up: first 50 handoffs');
    // The capacity table: measured beside the predicted band.
    expect(html).toMatch(/<section id="capacity">[\s\S]*host cores/);
  });

  it('renders a result without plot data (an older bench’s JSON) with empty charts, not an error', () => {
    const { series: _series, ...older } = delivery;
    const page = renderHtmlReport({ ...fixture, delivery: [older], capacity: undefined, send: undefined });
    expect(page).toContain('data-chart="latency-e2e-10"');
    expect(page).toContain('>no data</text>');
  });
});

describe('plot data recorded during a run', () => {
  it('counts latencies into the fixed buckets, a bound itself in its own bucket, the rest above the last', () => {
    const h = latencyHistogram([0.2, 1, 1.01, 59_999, 70_000, NaN]);
    expect(h.boundsMs).toEqual(LATENCY_BOUNDS_MS);
    expect(h.counts).toHaveLength(LATENCY_BOUNDS_MS.length + 1);
    expect(h.counts[0]).toBe(1); // 0.2 <= 0.5
    expect(h.counts[1]).toBe(1); // 1 <= 1
    expect(h.counts[2]).toBe(1); // 1.01 <= 2
    expect(h.counts.at(-2)).toBe(1); // 59,999 <= 60,000
    expect(h.counts.at(-1)).toBe(1); // above
    expect(h.counts.reduce((a, b) => a + b, 0)).toBe(5);
  });

  it('counts events per whole second from the start', () => {
    expect(perSecondCounts([1000, 1999, 2000, 4500, 900], 1000)).toEqual([3, 1, 0, 1]);
    expect(perSecondCounts([], 0)).toEqual([]);
  });

  it('turns a histogram into cumulative shares from the first value to the last', () => {
    expect(cumulativeShares(latencyHistogram([3, 3, 10, 20]))).toEqual([
      [2, 0],
      [3, 0.5],
      [5, 0.5],
      [7, 0.5],
      [10, 0.75],
      [15, 0.75],
      [20, 1],
    ]);
    expect(cumulativeShares(latencyHistogram([]))).toEqual([]);
  });
});
