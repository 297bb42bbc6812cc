import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { startClaudeCodeFixture, type ClaudeCodeFixture } from '../support/claude-code-fixture.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * The live page shows each agent's turn usage today and in the last hour, in a real browser
 * (Debian's Chromium through playwright-core), for turns the REAL Claude Code CLI ran against the
 * fake model, which reported known token counts: the agent's card shows what its turns used, one
 * without turns shows none, and an agent's own token sees its own usage and no other agent's.
 */
const CHROMIUM = process.env['BATON_CHROMIUM'] ?? '/usr/bin/chromium';

let fx: ClaudeCodeFixture;
let baton: TestBaton;
let url: string;
let browser: Browser;

async function signIn(page: Page, token: string): Promise<void> {
  await page.goto(`${url}/ui/`);
  await page.waitForURL(/\/ui\/sign-in/);
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  await page.waitForURL((u) => !u.pathname.startsWith('/ui/sign-in'));
}

const usageLine = (page: Page, agent: string, which: 'today' | 'last-hour') =>
  page.textContent(`#agents li[data-agent="${agent}"] [data-usage="${which}"]`);

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (.ci/run does)`);
  fx = await startClaudeCodeFixture('baton-live-usage-');
  fx.script('coder', () => ({ kind: 'reply', text: 'done', usage: { input: 1500, output: 250, cacheRead: 4000, cacheWrite: 600 } }));
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'idler', provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'coder', provider: 'claude_code', settings: fx.settings('coder') })).status).toBe(201);
  baton.startWorker({
    adapters: createAdapters(['claude_code'], { claudeCode: { runDir: fx.runDir, baseEnv: inheritedEnv(process.env) } }),
  });
  url = await baton.listen();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await baton?.stop();
  await fx?.close();
});

describe('per-agent usage on the live page', () => {
  it("shows an agent's turns, time, tokens and cost today and in the last hour; an agent's token sees only its own", async () => {
    for (const n of [1, 2]) {
      const res = await baton.post('/v1/handoffs', { from: 'lead', to: 'coder', message: `task ${n}` });
      expect(res.status).toBe(201);
      await waitForState(baton, res.body.id as string, 'RETURNED', 90_000);
    }
    const api = await baton.get('/v1/usage?agent=coder');
    const cost = api.body.total.costUsd as number;
    expect(cost).toBeGreaterThan(0);

    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, baton.adminToken);
    await page.waitForSelector('#agents li[data-agent="coder"] [data-usage="today"]');
    // Two turns: 2 × (1500 + 250 + 4000 + 600) tokens, 2 × 1500 in, 2 × 250 out, the cost the CLI reported.
    for (const which of ['today', 'last-hour'] as const) {
      const text = (await usageLine(page, 'coder', which)) ?? '';
      expect(text).toContain('2 turns');
      expect(text).toContain('12,700 tokens (3,000 in, 500 out)');
      expect(text).toContain(`$${cost.toFixed(4)}`);
    }
    expect(await usageLine(page, 'idler', 'today')).toContain('0 turns');
    await context.close();

    // The agent's own token: its own usage, no other agent's.
    const own = await browser.newContext();
    const agentPage = await own.newPage();
    await signIn(agentPage, await baton.tokenFor('idler'));
    await agentPage.waitForSelector('#agents li[data-agent="idler"] [data-usage="today"]');
    expect(await agentPage.$('#agents li[data-agent="coder"] [data-usage]')).toBeNull();
    await own.close();
  }, 240_000);
});
