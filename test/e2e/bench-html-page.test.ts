import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderHtmlReport } from '../../services/bench/html-report.ts';
import { fixture } from '../support/bench-result-fixture.ts';

/**
 * The bench's HTML page in a real browser (Debian's Chromium through playwright-core, as
 * live-page.test.ts): it renders its charts with nothing fetched and no error. Without
 * /usr/bin/chromium this fails: `.ci/run` installs it.
 */
const CHROMIUM = process.env['BATON_CHROMIUM'] ?? '/usr/bin/chromium';
let browser: Browser;

beforeAll(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 60_000);
afterAll(async () => {
  await browser?.close();
});

describe('the bench’s HTML page in a browser', () => {
  it('renders every chart and table, fetches nothing, logs no error, and shows escaped text as text', async () => {
    const page = await browser.newPage();
    const requests: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => void requests.push(r.url()));
    page.on('console', (m) => void (m.type() === 'error' && problems.push(m.text())));
    page.on('pageerror', (e) => void problems.push(e.message));
    await page.setContent(renderHtmlReport(fixture), { waitUntil: 'load' });
    expect(requests.filter((u) => !u.startsWith('about:') && !u.startsWith('data:'))).toEqual([]);
    expect(problems).toEqual([]);
    const charts = await page.$$eval('svg.chart', (svgs) =>
      svgs.map(
        (s) =>
          ({ id: s.getAttribute('data-chart'), ...s.getBoundingClientRect().toJSON() }) as { id: string; width: number; height: number },
      ),
    );
    expect(charts.map((c) => c.id)).toHaveLength(6);
    for (const c of charts) expect(c.width > 100 && c.height > 100, `${c.id} ${c.width}x${c.height}`).toBe(true);
    // Every line of the latency charts has a drawn length.
    const lengths = await page.$$eval('path.series', (paths) =>
      paths.map((p) => (p as unknown as { getTotalLength(): number }).getTotalLength()),
    );
    expect(lengths.length).toBeGreaterThan(5);
    expect(lengths.every((l) => l > 0)).toBe(true);
    const firstTarget = await page.$eval('#targets tbody tr td', (td) => td.textContent);
    expect(firstTarget).toBe('CPU <per> handoff & "more" <img src=x onerror=alert(1)>');
    expect(await page.$$('img')).toHaveLength(0);
    const json = await page.$eval('#bench-result', (s) => JSON.parse(s.textContent ?? 'null'));
    expect(json.capacity.runs[0].workers).toBe(2);
    await page.close();
  });
});
