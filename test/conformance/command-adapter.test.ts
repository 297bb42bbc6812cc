import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { inheritedEnv } from '../../libs/adapters/command/create-command-adapter.ts';
import { conformanceSuite, type ConformanceBehavior, type ConformanceHarness, type RecipientWrite } from './conformance-suite.ts';

/**
 * A real program per turn: a small Node script that takes its next behaviour from a script
 * file, keeps a ledger of every run (start and end, with BATON_REQUEST_ID), and answers with
 * the documented exit codes. Nothing imitates the command adapter: the worker starts this
 * program through its supervisor exactly as it would start a user's.
 */
const AGENT = `
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const dir = process.argv[2];
const requestId = process.env.BATON_REQUEST_ID;
const handoffId = process.env.BATON_HANDOFF_ID;
const scriptFile = join(dir, 'script.json');
const script = JSON.parse(readFileSync(scriptFile, 'utf8'));
const behavior = script.shift() ?? 'ok';
writeFileSync(scriptFile, JSON.stringify(script));
const log = (event) => appendFileSync(join(dir, 'ledger.jsonl'), JSON.stringify({ requestId, handoffId, behavior, event, at: Date.now() }) + '\\n');
log('start');
const input = readFileSync(0, 'utf8');
const end = (code) => { log('end'); process.exit(code); };
if (behavior === 'busy') end(75);
if (behavior === 'refuse') end(77);
if (behavior === 'fail') { process.stderr.write('the agent hit an error'); end(1); }
const until = behavior === 'slow' ? () => existsSync(join(dir, 'release')) : (() => { const t = Date.now() + 60; return () => Date.now() >= t; })();
const timer = setInterval(() => {
  if (!until()) return;
  clearInterval(timer);
  process.stdout.write('done: ' + (input.split('\\n')[0] || 'turn'));
  end(0);
}, 20);
`;

async function commandHarness(): Promise<ConformanceHarness> {
  const root = mkdtempSync(join(tmpdir(), 'baton-conformance-command-'));
  const agentFile = join(root, 'agent.mjs');
  writeFileSync(agentFile, AGENT);
  const runDir = join(root, 'runs');
  const dirOf = (handle: string) => join(root, 'agents', handle);
  return {
    provider: 'command',
    // Starting a program (a detached supervisor, then the program) takes far longer than 5 ms:
    // a real write that outlives its deadline, and a reply that never reaches the engine.
    lostWriteDeadlineMs: 5,
    adapters: (deadlines) =>
      createAdapters(['command'], {
        demoHost: undefined,
        command: { runDir, baseEnv: inheritedEnv(process.env) },
        deadlines: { command: deadlines },
      }),
    async agent(handle, script) {
      const dir = dirOf(handle);
      mkdirSync(dir, { recursive: true });
      // lose_reply and hang_write are made by the deadline (lostWriteDeadlineMs): the program itself just works.
      const own = script.map((b: ConformanceBehavior) => (b === 'lose_reply' || b === 'hang_write' ? 'ok' : b));
      writeFileSync(join(dir, 'script.json'), JSON.stringify(own));
      appendFileSync(join(dir, 'ledger.jsonl'), '');
      return { settings: { argv: [process.execPath, agentFile, dir], timeoutMs: 120_000 } };
    },
    async writes(handle): Promise<RecipientWrite[]> {
      const lines = readFileSync(join(dirOf(handle), 'ledger.jsonl'), 'utf8')
        .split('\n')
        .filter((l) => l !== '');
      const events = lines.map(
        (l) => JSON.parse(l) as { requestId: string; handoffId: string; behavior: string; event: 'start' | 'end'; at: number },
      );
      const runs = new Map<string, { requestId: string; handoffId: string; behavior: string; start: number; end: number | null }>();
      for (const e of events) {
        const run = runs.get(e.requestId) ?? {
          requestId: e.requestId,
          handoffId: e.handoffId,
          behavior: e.behavior,
          start: e.at,
          end: null,
        };
        if (e.event === 'end') run.end = e.at;
        runs.set(e.requestId, run);
      }
      // A start counts every time it happened (a second start of one request id is a resend).
      return events
        .filter((e) => e.event === 'start')
        .map((e) => {
          const live = [...runs.values()].find((r) => r.requestId !== e.requestId && r.start <= e.at && (r.end === null || r.end > e.at));
          return {
            requestId: e.requestId,
            handoffId: e.handoffId,
            at: e.at,
            liveTurn: live?.requestId ?? null,
            answer: e.behavior === 'busy' ? 'busy' : e.behavior === 'refuse' ? 'refused' : 'accepted',
          } satisfies RecipientWrite;
        });
    },
    async finish(handle) {
      writeFileSync(join(dirOf(handle), 'release'), '');
    },
    async close() {
      if (existsSync(root)) rmSync(root, { recursive: true, force: true });
    },
  };
}

conformanceSuite('command (real programs under the supervisor)', commandHarness);
