import type { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { startCodexFixture } from '../support/codex-fixture.ts';
import type { FakeBehaviour } from '../support/fake-models/fake-model-server.ts';
import { conformanceSuite, type ConformanceBehavior, type ConformanceHarness, type RecipientWrite } from './conformance-suite.ts';

/**
 * The REAL `codex app-server` (scripts/install-agent-clis.sh) behind Baton's engine, with the
 * fake Responses server on loopback as its model. Each agent gets an existing thread (made by a
 * real `codex exec`), and its turns follow the script through the model's answers:
 * - ok / fail / slow: the model answers at once / fails the stream / holds its answer until `finish`;
 * - busy: a turn started OUTSIDE Baton (`codex exec resume`, its answer held) owns the thread until
 *   Baton has recorded BUSY for it (a write then would steer into that turn);
 * - refuse: the agent's working directory does not exist on the host (a configuration refusal);
 * - lose_reply / hang_write: the write's deadline is cut to 5 ms, as for the command harness: the
 *   real write outlives it.
 * The ledger is every model request that carried a Baton marker: one per turn Codex ran.
 */
async function codexHarness(baton: Parameters<Parameters<typeof conformanceSuite>[1]>[0]): Promise<ConformanceHarness> {
  const fx = await startCodexFixture();
  const registries: AdapterRegistry[] = [];
  const agents = new Map<
    string,
    {
      threadId: string;
      script: ConformanceBehavior[];
      writes: RecipientWrite[];
      live: string | null;
      held: Array<() => void>;
      finishEarly: boolean;
    }
  >();
  const byThread = new Map<string, string>();
  /** Outside turns by prompt: they carry no marker and are answered from their hold. */
  const outside = new Map<string, ReturnType<typeof fx.hold>>();
  let closed = false;
  const MARKER = /^baton-request-id: (\S+)$/m;

  fx.fake.script((x): FakeBehaviour => {
    const threadId = String(x.headers['thread-id'] ?? x.headers['session-id'] ?? '');
    const a = agents.get(byThread.get(threadId) ?? '');
    for (const [prompt, held] of outside) if (x.prompt.includes(prompt)) return held.behaviour;
    const requestId = MARKER.exec(x.prompt)?.[1];
    if (!a || !requestId) return { kind: 'reply', text: 'ok' };
    a.writes.push({ requestId, handoffId: '', at: x.at, liveTurn: a.live, answer: 'accepted' });
    a.live = requestId;
    const behaviour = a.script.shift() ?? 'ok';
    const done = () => {
      if (a.live === requestId) a.live = null;
    };
    // `finish` may come before Codex has asked the model (RUNNING is its turn/started): then answer at once.
    if (behaviour === 'slow' && !a.finishEarly) {
      const held = fx.hold(`done: ${requestId}`);
      a.held.push(() => {
        done();
        held.release();
      });
      return held.behaviour;
    }
    done();
    if (behaviour === 'fail') return { kind: 'stream_error', message: 'the agent hit an error' };
    return { kind: 'reply', text: `done: ${requestId}` };
  });

  /** Holds the thread with a turn outside Baton until Baton has recorded BUSY for this agent. */
  async function busyOutside(handle: string, threadId: string): Promise<void> {
    const a = agents.get(handle)!;
    const held = fx.hold('outside done');
    const prompt = `an outside turn for ${handle}`;
    outside.set(prompt, held);
    a.live = 'outside-turn';
    const previous = fx.fake.exchanges.length;
    // The outside turn is over when Codex says so (`turn.completed`), which Baton's adapter can
    // see in the thread before `codex exec` has exited: a write after it overlaps nothing.
    const ended = () => {
      if (a.live === 'outside-turn') a.live = null;
    };
    const run = fx.execThread(prompt, threadId, (e) => {
      if (e.type === 'turn.completed' || e.type === 'turn.failed') ended();
    });
    // How the outside turn ends is not what this test checks, only when (below).
    run.catch(() => undefined);
    // The outside turn is live once its model request arrived (and is held).
    while (!closed && !fx.fake.exchanges.slice(previous).some((x) => x.prompt.includes(prompt)))
      await new Promise((r) => setTimeout(r, 20));
    void (async () => {
      while (!closed) {
        const { rows } = await baton.db.pool.query(
          `SELECT 1 FROM handoff_events e JOIN handoffs h ON h.id = e.handoff_id JOIN agents a ON a.id = h.recipient_id WHERE a.handle = $1 AND e.to_state = 'BUSY' LIMIT 1`,
          [handle],
        );
        if (rows.length > 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      held.release();
      // As above: only that the outside turn is over matters here.
      await run.catch(() => undefined);
      ended();
    })();
  }

  return {
    provider: 'codex',
    lostWriteDeadlineMs: 5,
    adapters(deadlines) {
      const r = createAdapters(['codex'], {
        demoHost: undefined,
        codex: { baseEnv: fx.env, pollMs: 100 },
        deadlines: { codex: deadlines },
      });
      registries.push(r);
      return r;
    },
    async agent(handle, script) {
      const threadId = await fx.execThread(`the conversation of ${handle} so far`);
      const own = script.filter((b) => b !== 'busy').map((b) => (b === 'lose_reply' || b === 'hang_write' ? 'ok' : b));
      agents.set(handle, { threadId, script: own, writes: [], live: null, held: [], finishEarly: false });
      byThread.set(threadId, handle);
      if (script[0] === 'busy') await busyOutside(handle, threadId);
      const cwd = script[0] === 'refuse' ? `${fx.cwd}/does-not-exist` : fx.cwd;
      return { settings: { cwd, codexHome: fx.codexHome, binary: fx.binary }, target: threadId };
    },
    async writes(handle) {
      return [...(agents.get(handle)?.writes ?? [])];
    },
    async finish(handle) {
      const a = agents.get(handle);
      if (!a) return;
      if (a.held.length === 0) a.finishEarly = true;
      for (const release of a.held.splice(0)) release();
    },
    async close() {
      closed = true;
      for (const held of outside.values()) held.release();
      for (const a of agents.values()) for (const release of a.held.splice(0)) release();
      await Promise.all(registries.map((r) => r.close()));
      if (fx.tripwire.attempts.length > 0 || fx.fake.refusedConnections > 0) {
        throw new Error(
          `egress attempted: ${JSON.stringify(fx.tripwire.attempts)}, refused non-loopback connections: ${fx.fake.refusedConnections}`,
        );
      }
      await fx.close();
    },
  };
}

conformanceSuite('codex (the real codex app-server)', codexHarness, { writeDeadlineMs: 10_000, timeoutMs: 60_000 });
