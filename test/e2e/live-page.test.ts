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

async function shot(page: Page, name: string): Promise<void> {
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`screenshot: ${file}`);
}

async function signIn(page: Page, token: string, next = '/ui/', base = url): Promise<void> {
  await page.goto(`${base}${next}`);
  await page.waitForURL(/\/ui\/sign-in/);
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  await page.waitForURL((u) => !u.pathname.startsWith('/ui/sign-in'));
}

async function sendOverApi(body: Record<string, unknown>, token = baton.adminToken): Promise<{ id: string }> {
  const res = await fetch(`${url}/v1/handoffs`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string };
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (.ci/run does), or point BATON_CHROMIUM at one`);
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

    await page.click(row);
    await page.waitForSelector(`#timeline-section[data-handoff-id="${sent.id}"]:not([hidden])`);
    const steps = await page.$$eval('#timeline li', (items) => items.map((li) => li.getAttribute('data-to')));
    expect(steps[0]).toBe('WAITING');
    expect(steps).toContain('ACCEPTED');
    expect(steps.at(-1)).toBe('RETURNED');
    expect(await page.textContent('#timeline-title')).toContain('Browser test: login form');
    await shot(page, '2-timeline');
    expect(pageErrors).toEqual([]);
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
    const shown = await page.$$eval('#handoffs tr[data-handoff-id], #attention li[data-handoff-id]', (rows) => rows.map((r) => r.getAttribute('data-handoff-id')));
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
    'after sign-in never leaves for next=%s: only Baton\'s own pages on this origin',
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
    await signIn(page, baton.adminToken, '/admin/queues');
    expect(new URL(page.url()).pathname).toMatch(/^\/admin\/queues/);
    await page.waitForSelector('text=delivery-demo-0', { timeout: 15_000 });
    await shot(page, '4-bull-board');
    const write = await page.evaluate(async () => {
      const session = (await (await fetch('/ui/session')).json()) as { csrfToken: string };
      const res = await fetch(`/admin/queues/api/queues/${encodeURIComponent('{delivery-demo-0}')}/retry/failed`, { method: 'PUT', headers: { 'x-csrf-token': session.csrfToken } });
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
      const token = /BATON_TOKEN=(baton_[A-Za-z0-9_-]+)/.exec(demo.output())?.[1];
      expect(page, demo.output()).toBeDefined();
      expect(token, demo.output()).toBeDefined();
      const context = await browser.newContext();
      const tab = await context.newPage();
      await signIn(tab, token as string, '/ui/', page as string);
      await tab.waitForSelector('#connection[data-connection="live"]', { timeout: 15_000 });
      for (const name of ['Planner', 'Engineer', 'Reviewer', 'Writer']) await tab.waitForSelector(`#agents li >> text=${name}`, { timeout: 15_000 });
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
