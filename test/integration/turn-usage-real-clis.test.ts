import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { startClaudeCodeFixture, type ClaudeCodeFixture } from '../support/claude-code-fixture.ts';
import { startCodexFixture, type CodexFixture } from '../support/codex-fixture.ts';
import type { FakeBehaviour, FakeExchange, FakeModelServer, FakeUsage } from '../support/fake-models/fake-model-server.ts';
import { captureCli } from '../support/capture-cli.ts';
import { scratchDir } from '../support/scratch-dir.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * Turn accounting through Baton's engine and the REAL CLIs (pinned, against the fake model on
 * loopback): the fake reports known token counts with each reply, and what Baton records for the
 * attempt (GET /v1/handoffs/:id `usage`) is what the model server sent, as each runtime passes it
 * on. Two turns in one session with different counts: each attempt has its own turn's numbers,
 * never the session's running total.
 *
 * - Claude Code: its stream result's `usage` (input not cached, cache reads, cache writes,
 *   output) and the model of its assistant messages; the cost is what the CLI computed from the
 *   tokens (its `total_cost_usd`, which Baton also keeps in the turn's result), stored as reported.
 * - Codex: `thread/tokenUsage/updated`; the Responses API counts cached input inside
 *   `input_tokens`, and Baton stores input without it (as Anthropic counts it) and the cached part
 *   as cache reads. Codex reports no cost.
 */

const TURNS: readonly FakeUsage[] = [
  { input: 1234, output: 56, cacheRead: 700, cacheWrite: 300 },
  { input: 4321, output: 78, cacheRead: 20, cacheWrite: 5 },
];

interface RealCli {
  readonly provider: 'claude_code' | 'codex';
  readonly fake: FakeModelServer;
  settings(): Record<string, unknown>;
  adapters(): ReturnType<typeof createAdapters>;
  script(choose: (ex: FakeExchange) => FakeBehaviour): void;
  /** What Baton should record of the fake's usage `u` (the runtime's own accounting of it). */
  expected(u: FakeUsage): { inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number };
  close(): Promise<void>;
}

const CLIS: ReadonlyArray<{ name: string; start: () => Promise<RealCli> }> = [
  {
    name: 'Claude Code',
    start: async () => {
      const fx: ClaudeCodeFixture = await startClaudeCodeFixture('baton-claude-usage-');
      return {
        provider: 'claude_code',
        fake: fx.fake,
        settings: () => fx.settings('agent'),
        adapters: () => createAdapters(['claude_code'], { claudeCode: { runDir: fx.runDir, baseEnv: inheritedEnv(process.env) } }),
        script: (choose) => fx.script('agent', choose),
        expected: (u) => ({
          inputTokens: u.input,
          outputTokens: u.output,
          cacheReadTokens: u.cacheRead ?? 0,
          cacheWriteTokens: u.cacheWrite ?? 0,
        }),
        close: () => fx.close(),
      };
    },
  },
  {
    name: 'Codex',
    start: async () => {
      const fx: CodexFixture = await startCodexFixture();
      return {
        provider: 'codex',
        fake: fx.fake,
        settings: () => ({ cwd: fx.cwd, codexHome: fx.codexHome, binary: fx.binary }),
        adapters: () => createAdapters(['codex'], { codex: { baseEnv: fx.env, pollMs: 100 } }),
        script: (choose) => fx.fake.script(choose),
        // The fake sent input_tokens = input + cacheRead with cached_tokens = cacheRead; Codex
        // reports no cache writes from the Responses API.
        expected: (u) => ({ inputTokens: u.input, outputTokens: u.output, cacheReadTokens: u.cacheRead ?? 0, cacheWriteTokens: 0 }),
        close: () => fx.close(),
      };
    },
  },
];

describe.each(CLIS)('$name: turn accounting', ({ start }) => {
  let cli: RealCli;
  let baton: TestBaton;

  beforeAll(async () => {
    cli = await start();
    baton = await startTestBaton();
    expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
  });

  afterAll(async () => {
    await baton?.stop();
    await cli?.close();
  });

  it('records per attempt the tokens and model the model server reported, and the cost as the runtime reported it', async () => {
    let turn = 0;
    const models: string[] = [];
    cli.script((ex) => {
      const body = ex.body as { model?: unknown };
      if (typeof body.model === 'string') models.push(body.model);
      const usage = TURNS[Math.min(turn, TURNS.length - 1)]!;
      return { kind: 'reply', text: `answered turn ${turn + 1}`, usage };
    });
    expect((await baton.post('/v1/agents', { id: 'agent', provider: cli.provider, settings: cli.settings() })).status).toBe(201);
    const worker = baton.startWorker({ adapters: cli.adapters() });
    try {
      const seen: Array<Record<string, unknown>> = [];
      for (const [i, sent] of TURNS.entries()) {
        const before = cli.fake.exchanges.length;
        const res = await baton.post('/v1/handoffs', { from: 'lead', to: 'agent', message: `turn ${i + 1}` });
        expect(res.status).toBe(201);
        const done = await waitForState(baton, res.body.id as string, 'RETURNED', 90_000);
        // One model request per turn, so the turn's usage is that request's.
        expect(cli.fake.exchanges.length - before).toBe(1);
        turn++;
        const detail = await baton.get(`/v1/handoffs/${done.id as string}`);
        const usage = detail.body.usage as { attempts: Array<Record<string, unknown>>; total: Record<string, unknown> };
        expect(usage.attempts).toHaveLength(1);
        const a = usage.attempts[0]!;
        expect(a).toMatchObject({ number: 1, status: 'returned', ...cli.expected(sent) });
        expect(a['model']).toBe(models.at(-1));
        expect(a['turnSeconds']).toBeGreaterThan(0);
        if (cli.provider === 'claude_code') {
          // Claude computes the cost from the tokens; Baton stores what it reported, unchanged.
          const reported = (detail.body.result as { output: { costUsd?: unknown } }).output.costUsd;
          expect(typeof reported).toBe('number');
          expect(reported as number).toBeGreaterThan(0);
          expect(a['costUsd']).toBe(reported);
        } else {
          expect(a['costUsd']).toBeNull();
        }
        expect(usage.total).toMatchObject({ turns: 1, ...cli.expected(sent), costUsd: a['costUsd'] });
        seen.push(a);
      }
      // Per agent over today: both turns, summed.
      const report = await baton.get('/v1/usage?agent=agent');
      expect(report.status).toBe(200);
      const total = report.body.total as Record<string, number>;
      const sum = (k: 'inputTokens' | 'outputTokens' | 'cacheReadTokens' | 'cacheWriteTokens') =>
        TURNS.reduce((n, u) => n + cli.expected(u)[k], 0);
      expect(total).toMatchObject({
        turns: 2,
        inputTokens: sum('inputTokens'),
        outputTokens: sum('outputTokens'),
        cacheReadTokens: sum('cacheReadTokens'),
        cacheWriteTokens: sum('cacheWriteTokens'),
      });
      if (cli.provider === 'claude_code')
        expect(total['costUsd']).toBeCloseTo((seen[0]!['costUsd'] as number) + (seen[1]!['costUsd'] as number), 9);

      // /metrics counts the same turns by provider, agent and model.
      const scrape = await baton.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${baton.adminToken}` } });
      const labels = `provider="${cli.provider}",agent="agent",model="${models.at(-1)}"`;
      const value = (line: string) =>
        Number(
          scrape.body
            .split('\n')
            .find((l) => l.startsWith(line + ' '))
            ?.slice(line.length + 1),
        );
      expect(value(`baton_turns_total{${labels}}`)).toBe(2);
      expect(value(`baton_turn_tokens_total{${labels},kind="input"}`)).toBe(sum('inputTokens'));
      expect(value(`baton_turn_tokens_total{${labels},kind="output"}`)).toBe(sum('outputTokens'));
      expect(value(`baton_turn_tokens_total{${labels},kind="cache_read"}`)).toBe(sum('cacheReadTokens'));
      expect(value(`baton_turn_seconds_total{${labels}}`)).toBeGreaterThan(0);
      expect(value(`baton_turn_cost_usd_total{${labels}}`)).toBeCloseTo((total['costUsd'] as number | null) ?? 0, 9);

      // Who sees it: the agent its own turns; another agent neither them nor a way to name them.
      const asAgent = async (agent: string, path: string) =>
        baton.app.inject({ method: 'GET', url: path, headers: { authorization: `Bearer ${await baton.tokenFor(agent)}` } });
      const own = await asAgent('agent', '/v1/usage');
      expect(own.statusCode).toBe(200);
      expect(own.json().total.turns).toBe(2);
      const other = await asAgent('lead', '/v1/usage');
      expect(other.json()).toMatchObject({ agent: 'lead', rows: [], total: { turns: 0 } });
      const named = await asAgent('lead', '/v1/usage?agent=agent');
      expect(named.statusCode).toBe(403);
      expect(named.json().error.code).toBe('forbidden');

      // The CLI: `baton usage` as a table, `baton show` with each attempt's usage.
      const env = { BATON_URL: await baton.listen(), BATON_TOKEN: baton.adminToken, BATON_HOME: scratchDir('baton-usage-cli-') };
      const table = await captureCli(env, ['usage', '--agent', 'agent', '--since', '1h']);
      expect(table.code, table.err).toBe(0);
      const row = table.out.split('\n').find((l) => l.startsWith('agent '));
      expect(row).toContain(cli.provider);
      expect(row).toContain(models.at(-1));
      expect(row).toContain(sum('inputTokens').toLocaleString('en-US'));
      expect(row).toContain(sum('outputTokens').toLocaleString('en-US'));
      const last = await baton.get('/v1/handoffs?limit=1');
      const shown = await captureCli(env, ['show', last.body.items[0].id as string]);
      expect(shown.code, shown.err).toBe(0);
      expect(shown.out).toMatch(/ {2}usage\n {4}#1 \d+\.\ds, in [\d,]+, out [\d,]+, cache read [\d,]+, cache write [\d,]+, /);
      expect(shown.out).toContain(`in ${cli.expected(TURNS[1]!).inputTokens.toLocaleString('en-US')}, out ${TURNS[1]!.output}`);
    } finally {
      await worker.stop();
    }
  }, 240_000);

  it('a budget the turns reach holds the next handoff HELD with no attempt spent, counted from what the runtime reported; a higher budget lets it go', async () => {
    const tokensOf = (u: Record<string, number>) => u['inputTokens']! + u['outputTokens']! + u['cacheReadTokens']! + u['cacheWriteTokens']!;
    const before = tokensOf((await baton.get('/v1/usage?agent=agent')).body.total as Record<string, number>);
    cli.script(() => ({ kind: 'reply', text: 'within budget', usage: TURNS[0]! }));
    // One token left today: the next turn reaches the budget, and the one queued behind it waits.
    expect((await baton.put('/v1/budgets', { agent: 'agent', tokensPerDay: before + 1 })).status).toBe(200);
    const worker = baton.startWorker({ adapters: cli.adapters() });
    try {
      const first = await baton.post('/v1/handoffs', { from: 'lead', to: 'agent', message: 'reaches the budget' });
      const second = await baton.post('/v1/handoffs', { from: 'lead', to: 'agent', message: 'waits for a higher budget' });
      await waitForState(baton, first.body.id as string, 'RETURNED', 90_000);
      const held = await waitForState(baton, second.body.id as string, 'HELD', 30_000);
      expect(held.attemptCount).toBe(0);
      const spent = before + tokensOf(cli.expected(TURNS[0]!));
      expect(held.detail).toBe(
        `budget: agent agent spent ${spent} of ${before + 1} tokens today (UTC); held until ${nextUtcMidnight()} or a higher budget`,
      );
      const budgets = (await baton.get('/v1/budgets?agent=agent')).body.items as Array<{ agent: string; spentToday: { tokens: number } }>;
      expect(budgets.find((b) => b.agent === 'agent')?.spentToday.tokens).toBe(spent);
      expect((await baton.put('/v1/budgets', { agent: 'agent', tokensPerDay: spent * 2 })).status).toBe(200);
      await waitForState(baton, second.body.id as string, 'RETURNED', 90_000);
    } finally {
      await worker.stop();
      await baton.del('/v1/budgets?agent=agent');
    }
  }, 240_000);
});

function nextUtcMidnight(): string {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)).toISOString();
}
