import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnBaton } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * The live page and Bull Board in a real browser: Debian's Chromium driven by playwright-core
 * (Playwright's own browser download cannot work offline), against a listening API with its
 * event stream and an in-process delivery worker. Screenshots go to test-results/live-page/.
 * Without /usr/bin/chromium this fails: `.ci/run` installs it (`apt-get install -y chromium`).
 */
const CHROMIUM = process.env['BATON_CHROMIUM'] ?? '/usr/bin/chromium';
const SHOTS = path.resolve('test-results', 'live-page');

let baton: TestBaton;
let url: string;
let browser: Browser;

async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage });
  console.log(`screenshot: ${file}`);
}

async function signIn(page: Page, token: string, next = '/ui/', base = url): Promise<void> {
  await page.goto(`${base}${next}`);
  await page.waitForURL(/\/ui\/sign-in/);
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  await page.waitForURL((u) => !u.pathname.startsWith('/ui/sign-in'));
}

/** Whether the element's box lies within the viewport (at least partly, and its top on screen). */
async function inViewport(page: Page, selector: string): Promise<boolean> {
  const r = await page.$eval(
    selector,
    (node) => node.getBoundingClientRect().toJSON() as { top: number; left: number; width: number; height: number },
  );
  const view = await page.evaluate<{ width: number; height: number }>('({ width: window.innerWidth, height: window.innerHeight })');
  return r.width > 0 && r.height > 0 && r.top >= 0 && r.top < view.height && r.left >= 0 && r.left < view.width;
}

/** What the chart's bars add up to for one outcome. */
async function chartCount(page: Page, state: string): Promise<number> {
  return page.$$eval(`#chart-settled rect.bar[data-state="${state}"]`, (bars) =>
    bars.reduce((n, b) => n + Number(b.getAttribute('data-count')), 0),
  );
}

async function sendOverApi(body: Record<string, unknown>, token = baton.adminToken): Promise<{ id: string }> {
  const res = await fetch(`${url}/v1/handoffs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string };
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `no Chromium at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (.ci/run does), or point BATON_CHROMIUM at one`,
    );
  }
  mkdirSync(SHOTS, { recursive: true });
  baton = await startTestBaton();
  for (const id of ['planner', 'engineer', 'reviewer', 'writer']) {
    const added = await baton.post('/v1/agents', { id, provider: 'demo', settings: { thinkMs: 300 } });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
  }
  baton.startWorker();
  url = await baton.listen();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
});

afterAll(async () => {
  await browser?.close();
  await baton?.stop();
});

describe('the live page in a browser', () => {
  it('signs an admin in, shows a handoff sent over the API reaching RETURNED without a reload, and opens its timeline', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    page.on('console', (m) => {
      // A CSP violation is reported on the console: the page must cause none.
      if (/Content Security Policy/i.test(m.text())) pageErrors.push(m.text());
    });
    await signIn(page, baton.adminToken);
    expect(new URL(page.url()).pathname).toBe('/ui/');
    await page.waitForSelector('#connection[data-connection="live"]');
    await page.waitForSelector('#agents li[data-agent="engineer"]');
    // Set after the first paint: still there at the end only if the page never reloaded.
    await page.evaluate('window.notReloaded = true');

    const sent = await sendOverApi({ from: 'planner', to: 'engineer', title: 'Browser test: login form', message: 'Add a login form' });
    const row = `#handoffs tr[data-handoff-id="${sent.id}"]`;
    await page.waitForSelector(row, { timeout: 15_000 });
    await page.waitForSelector(`${row}[data-state="RETURNED"]`, { timeout: 20_000 });
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    // The delivery times follow (re-read after the events): send → returned has a figure now.
    const p50 = page.locator('#times tr[data-figure="returned"] td').first();
    await expect.poll(() => p50.textContent(), { timeout: 10_000 }).toMatch(/\d/);
    await shot(page, '1-live-page');

    // Scrolled to the top, the row far below: the timeline still opens where the eye is.
    await page.evaluate('window.scrollTo(0, 0)');
    await page.click(row);
    await page.waitForSelector(`#timeline-section[data-handoff-id="${sent.id}"][data-loaded]`);
    expect(await inViewport(page, '#timeline-section'), 'the timeline panel is on screen').toBe(true);
    expect(await inViewport(page, '#timeline li:last-child'), 'its newest step is on screen').toBe(true);
    expect(new URL(page.url()).pathname, "the address is the handoff's own").toBe(`/ui/handoffs/${sent.id}`);
    expect(await page.getAttribute('#timeline-link', 'href')).toBe(`/ui/handoffs/${sent.id}`);
    const steps = await page.$$eval('#timeline li', (items) => items.map((li) => li.getAttribute('data-to')));
    expect(steps[0]).toBe('WAITING');
    expect(steps).toContain('ACCEPTED');
    expect(steps.at(-1)).toBe('RETURNED');
    expect(await page.textContent('#timeline-title')).toContain('Browser test: login form');
    await shot(page, '2-timeline', false);
    // Back closes the panel and gives the page its address again; Escape closes it too.
    await page.goBack();
    await page.waitForSelector('#timeline-section', { state: 'hidden' });
    expect(new URL(page.url()).pathname).toBe('/ui/');
    // From the keyboard: a row takes the focus, Enter opens it, Escape closes it.
    await page.focus(row);
    await page.keyboard.press('Enter');
    await page.waitForSelector(`#timeline-section[data-handoff-id="${sent.id}"][data-loaded]`);
    await page.keyboard.press('Escape');
    await page.waitForSelector('#timeline-section', { state: 'hidden' });
    expect(new URL(page.url()).pathname).toBe('/ui/');
    expect(pageErrors).toEqual([]);
    await context.close();
  });

  it("opens a handoff's own address with its timeline in view, through sign-in", async () => {
    const sent = await sendOverApi({
      from: 'planner',
      to: 'reviewer',
      title: 'Browser test: a shared link',
      message: 'Review the login form',
    });
    const context = await browser.newContext();
    const page = await context.newPage();
    // Not signed in yet: sign-in must bring the browser back to this very address.
    await signIn(page, baton.adminToken, `/ui/handoffs/${sent.id}`);
    expect(new URL(page.url()).pathname).toBe(`/ui/handoffs/${sent.id}`);
    await page.waitForSelector(`#timeline-section[data-handoff-id="${sent.id}"][data-loaded]`, { timeout: 15_000 });
    expect(await page.textContent('#timeline-title')).toContain('Browser test: a shared link');
    expect(await inViewport(page, '#timeline-section')).toBe(true);
    expect(await page.getAttribute(`#handoffs tr[data-handoff-id="${sent.id}"]`, 'aria-selected')).toBe('true');
    await shot(page, '6-shared-link');
    // An address naming a handoff that is not there says so in the panel.
    await page.goto(`${url}/ui/handoffs/01a00000-0000-7000-8000-000000000000`);
    await page.waitForSelector('#timeline-error:not([hidden])');
    expect(await page.textContent('#timeline-error')).toMatch(/not found|no handoff/i);
    await context.close();
  });

  it("fills a RUNNING row's work cell from the moment it appears, even when the row first arrives by the event stream", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, baton.adminToken);
    await page.waitForSelector('#connection[data-connection="live"]');
    // Every paint of a row is watched: an empty "work" cell on a handoff with work is a miss.
    await page.evaluate(`(() => {
      window.emptyWork = [];
      const body = document.querySelector('#handoffs tbody');
      new MutationObserver(() => {
        for (const tr of body.rows) {
          if (tr.cells[0].textContent.startsWith('Work cell') && tr.cells[3].textContent === '') window.emptyWork.push(tr.getAttribute('data-state'));
        }
      }).observe(body, { childList: true, subtree: true, characterData: true });
    })()`);
    const sent = [];
    for (let i = 0; i < 3; i++) sent.push(await sendOverApi({ from: 'planner', to: 'engineer', title: `Work cell ${i}`, message: 'x' }));
    for (const h of sent) await page.waitForSelector(`#handoffs tr[data-handoff-id="${h.id}"][data-state="RETURNED"]`, { timeout: 30_000 });
    const cells = await page.$$eval('#handoffs tbody tr', (rows) =>
      rows.filter((r) => r.cells[0]!.textContent!.startsWith('Work cell')).map((r) => r.cells[3]!.textContent),
    );
    expect(cells).toEqual(['returned', 'returned', 'returned']);
    expect(await page.evaluate('window.emptyWork')).toEqual([]);
    await context.close();
  });

  it('lets an admin switch projects: the choice is in the address, the page then shows that project only, live', async () => {
    expect((await baton.post('/v1/projects', { id: 'second', name: 'Second project' })).status).toBe(201);
    const inSecond = { 'x-baton-project': 'second' };
    for (const id of ['lead', 'builder'])
      expect((await baton.post('/v1/agents', { id, provider: 'demo', settings: { thinkMs: 100 } }, inSecond)).status).toBe(201);
    expect((await baton.post('/v1/agents', { id: 'desk', provider: 'manual' }, inSecond)).status).toBe(201);
    const there = await baton.post('/v1/handoffs', { from: 'lead', to: 'desk', title: 'Only in second', message: 'x' }, inSecond);
    expect(there.status).toBe(201);
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, baton.adminToken);
    await page.waitForSelector('#project-picker:not([hidden])');
    expect(await page.$$eval('#project option', (o) => o.map((x) => x.getAttribute('value')))).toEqual(
      expect.arrayContaining(['default', 'second']),
    );
    expect(await page.inputValue('#project')).toBe('default');
    await page.selectOption('#project', 'second');
    await page.waitForURL((u) => u.pathname === '/ui/' && u.searchParams.get('project') === 'second');
    await page.waitForSelector('body[data-project="second"]');
    await page.waitForSelector('#connection[data-connection="live"]');
    expect(await page.inputValue('#project')).toBe('second');
    await page.waitForSelector(`#handoffs tr[data-handoff-id="${there.body.id}"]`);
    const agents = await page.$$eval('#agents li', (items) => items.map((li) => li.getAttribute('data-agent')).sort());
    expect(agents).toEqual(['builder', 'desk', 'lead']);
    expect(await page.textContent('#handoffs')).not.toContain('Browser test');
    // Live in that project: a handoff sent there now arrives by the event stream.
    const later = await baton.post(
      '/v1/handoffs',
      { from: 'lead', to: 'builder', title: 'Sent to second while watching', message: 'x' },
      inSecond,
    );
    await page.waitForSelector(`#handoffs tr[data-handoff-id="${later.body.id}"][data-state="RETURNED"]`, { timeout: 30_000 });
    // A handoff's link keeps the project.
    await page.click(`#handoffs tr[data-handoff-id="${there.body.id}"]`);
    await page.waitForSelector(`#timeline-section[data-handoff-id="${there.body.id}"][data-loaded]`);
    expect(new URL(page.url()).search).toBe('?project=second');
    await shot(page, '7-second-project');
    // The chart counts what settled in this project in the last hour: the one return so far.
    await expect.poll(() => chartCount(page, 'RETURNED'), { timeout: 10_000 }).toBe(1);
    await context.close();
  });

  it('draws the last hour: bars of what settled per minute by outcome, with the counts the API gives, and p50/p90 points', async () => {
    const inSecond = { 'x-baton-project': 'second' };
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, baton.adminToken, '/ui/?project=second');
    await page.waitForSelector('#connection[data-connection="live"]');
    const before = await chartCount(page, 'RETURNED');
    const sent = [];
    for (let i = 0; i < 3; i++)
      sent.push(
        (await baton.post('/v1/handoffs', { from: 'lead', to: 'builder', title: `Chart ${i}`, message: 'x' }, inSecond)).body.id as string,
      );
    const parked = await baton.post('/v1/handoffs', { from: 'lead', to: 'desk', title: 'Chart: cancelled', message: 'x' }, inSecond);
    expect((await baton.post(`/v1/handoffs/${parked.body.id}/cancel`, { as: 'lead' }, inSecond)).status).toBe(200);
    for (const id of sent) await page.waitForSelector(`#handoffs tr[data-handoff-id="${id}"][data-state="RETURNED"]`, { timeout: 30_000 });
    await expect.poll(() => chartCount(page, 'RETURNED'), { timeout: 10_000 }).toBe(before + 3);
    await expect.poll(() => chartCount(page, 'CANCELLED'), { timeout: 10_000 }).toBe(1);
    // The bars say what the API says, minute by minute.
    const live = await baton.get('/v1/live?all_owners=true', inSecond);
    const fromApi = (live.body.perMinute as Array<{ at: string; settled: Record<string, number> }>)
      .flatMap((m) => Object.entries(m.settled).map(([state, n]) => `${m.at} ${state} ${n}`))
      .sort();
    const drawn = await page.$$eval('#chart-settled rect.bar', (bars) =>
      bars.map((b) => `${b.getAttribute('data-minute')} ${b.getAttribute('data-state')} ${b.getAttribute('data-count')}`).sort(),
    );
    expect(drawn).toEqual(fromApi);
    expect(await page.getAttribute('#chart-legend [data-state="RETURNED"]', 'data-count')).toBe(String(before + 3));
    expect(await page.getAttribute('#chart-legend [data-state="CANCELLED"]', 'data-count')).toBe('1');
    // One p50 and one p90 point per minute that had returns, p90 never under p50.
    const withReturns = (live.body.perMinute as Array<{ returned: { count: number } }>).filter((m) => m.returned.count > 0).length;
    expect(await page.locator('#chart-times circle.p50').count()).toBe(withReturns);
    expect(await page.locator('#chart-times circle.p90').count()).toBe(withReturns);
    expect(await inViewport(page, '#chart-settled')).toBe(true);
    await page.locator('#chart-section').screenshot({ path: path.join(SHOTS, '8-chart.png') });
    await context.close();
  });

  it('fits a 375 px wide phone: no sideways scrolling, with long titles, and with the timeline open', async () => {
    await sendOverApi({
      from: 'planner',
      to: 'writer',
      title: 'A rather long title for a handoff that a phone must still show without sideways scrolling',
      message: 'x',
    });
    const context = await browser.newContext({ viewport: { width: 375, height: 740 } });
    const page = await context.newPage();
    await signIn(page, baton.adminToken);
    await page.waitForSelector('#connection[data-connection="live"]');
    await page.waitForSelector('#handoffs tbody tr');
    await page.waitForSelector('#chart-settled rect.bar');
    const overflow = () =>
      page.evaluate<{ scroll: number; client: number }>(
        '({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })',
      );
    const wide = await overflow();
    expect(wide.client).toBe(375);
    expect(wide.scroll, 'the document is no wider than the screen').toBeLessThanOrEqual(wide.client);
    await shot(page, '9-phone');
    await page.click('#handoffs tbody tr');
    await page.waitForSelector('#timeline-section[data-loaded]');
    expect(await inViewport(page, '#timeline-section')).toBe(true);
    const open = await overflow();
    expect(open.scroll).toBeLessThanOrEqual(open.client);
    await shot(page, '10-phone-timeline', false);
    await context.close();
  });

  it("shows an agent's session nothing its token may not see", async () => {
    const secret = await sendOverApi({ from: 'planner', to: 'engineer', title: 'Not for the writer', message: 'private' });
    const mine = await sendOverApi({ from: 'planner', to: 'writer', title: 'For the writer', message: 'yours' });
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, await baton.tokenFor('writer'));
    await page.waitForSelector('#connection[data-connection="live"]');
    await page.waitForSelector(`#handoffs tr[data-handoff-id="${mine.id}"]`, { timeout: 15_000 });
    // Sent while the page follows the stream: it must not arrive either.
    const later = await sendOverApi({ from: 'planner', to: 'reviewer', title: 'Also not for the writer', message: 'private' });
    const mineLater = await sendOverApi({ from: 'planner', to: 'writer', title: 'Also for the writer', message: 'yours' });
    await page.waitForSelector(`#handoffs tr[data-handoff-id="${mineLater.id}"]`, { timeout: 15_000 });
    const shown = await page.$$eval('#handoffs tr[data-handoff-id], #attention li[data-handoff-id]', (rows) =>
      rows.map((r) => r.getAttribute('data-handoff-id')),
    );
    expect(shown).not.toContain(secret.id);
    expect(shown).not.toContain(later.id);
    const text = (await page.textContent('body')) ?? '';
    expect(text).not.toContain('Not for the writer');
    expect(text).not.toContain('Also not for the writer');
    expect(await page.isHidden('#queues-link')).toBe(true);
    await shot(page, '3-agent-view');
    await context.close();
  });

  it.each(['/%5Cevil.example', 'https://evil.example/ui/', '/v1/status'])(
    "after sign-in never leaves for next=%s: only Baton's own pages on this origin",
    async (next) => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const left: string[] = [];
      page.on('request', (r) => {
        if (!r.url().startsWith(url)) left.push(r.url());
      });
      await page.goto(`${url}/ui/sign-in?next=${next}`);
      await page.fill('#token', baton.adminToken);
      await page.click('button[type=submit]');
      await page.waitForURL((u) => !u.pathname.startsWith('/ui/sign-in'));
      const landed = new URL(page.url());
      expect(landed.origin).toBe(new URL(url).origin);
      expect(landed.pathname).toBe('/ui/');
      expect(left, 'no request left for another origin').toEqual([]);
      await context.close();
    },
  );

  it('opens Bull Board for an admin, read-only: every delivery queue listed, a write refused', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const left: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(url)) left.push(r.url());
    });
    await signIn(page, baton.adminToken, '/admin/queues');
    expect(new URL(page.url()).pathname).toMatch(/^\/admin\/queues/);
    await page.waitForSelector('text=delivery-demo-0', { timeout: 15_000 });
    await shot(page, '4-bull-board');
    // A link on the page leads back to the live page (and one in its header's menu).
    const back = page.locator('#baton-live-link');
    expect(await back.isVisible()).toBe(true);
    await back.click();
    await page.waitForURL((u) => u.pathname === '/ui/');
    expect(left, 'Bull Board asked for nothing from another origin (no Google Fonts)').toEqual([]);
    const write = await page.evaluate(async () => {
      const session = (await (await fetch('/ui/session')).json()) as { csrfToken: string };
      const res = await fetch(`/admin/queues/api/queues/${encodeURIComponent('{delivery-demo-0}')}/retry/failed`, {
        method: 'PUT',
        headers: { 'x-csrf-token': session.csrfToken },
      });
      return { status: res.status, body: await res.text() };
    });
    expect(write.status, write.body).toBe(405);
    expect(write.body).toContain('QUEUE_READ_ONLY');
    await context.close();
  });

  it('npm run demo prints the live page and how to sign in, and the page shows the four demo agents working', async () => {
    const demo = spawnBaton(['demo', '--think-ms', '400'], {});
    try {
      const line = await demo.waitFor(/Live page: http:\/\/127\.0\.0\.1:\d+\/ui\/ .*admin token/, 90_000);
      const page = /Live page: (http:\/\/[^/\s]+)\/ui\//.exec(line)?.[1];
      const token = /(?:BATON_TOKEN=|admin token: )(baton_[A-Za-z0-9_-]+)/.exec(demo.output())?.[1];
      expect(page, demo.output()).toBeDefined();
      expect(token, demo.output()).toBeDefined();
      const context = await browser.newContext();
      const tab = await context.newPage();
      await signIn(tab, token as string, '/ui/', page);
      await tab.waitForSelector('#connection[data-connection="live"]', { timeout: 15_000 });
      for (const name of ['Planner', 'Engineer', 'Reviewer', 'Writer'])
        await tab.waitForSelector(`#agents li >> text=${name}`, { timeout: 15_000 });
      // Working: some agent is seen in a turn, and handoffs move on the page as they happen.
      await tab.waitForSelector('#agents li[data-activity="busy"]', { timeout: 30_000 });
      await tab.waitForSelector('#handoffs tr[data-state="RETURNED"]', { timeout: 30_000 });
      await shot(tab, '5-demo');
      await context.close();
    } finally {
      expect(await demo.stop('SIGINT', 30_000), demo.output()).toBe(0);
    }
  }, 150_000);
});
