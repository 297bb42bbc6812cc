import type { ApiClient } from '../../../libs/api-client/api-client.ts';

/** The four simulated agents of the demo, and who each hands work to next. */
export const DEMO_AGENTS = [
  { id: 'planner', name: 'Planner', next: 'engineer', verb: 'Plan what follows' },
  { id: 'engineer', name: 'Engineer', next: 'reviewer', verb: 'Implement' },
  { id: 'reviewer', name: 'Reviewer', next: 'writer', verb: 'Review' },
  { id: 'writer', name: 'Writer', next: 'planner', verb: 'Document' },
] as const;

const TOPICS = [
  'the login page',
  'rate limiting',
  'the CSV export',
  'search ranking',
  'the billing webhook',
  'dark mode',
  'the audit log',
  'retry budgets',
];

interface EventJson {
  seq: string;
  from: string | null;
  to: string;
  /** Set on work events (claimed, returned, closed): the work's move; the delivery state stays. */
  workFrom?: string | null;
  workTo?: string | null;
  event: string;
  at: string;
}

interface HandoffDetail {
  id: string;
  from: string;
  to: string | null;
  title: string | null;
  state: string;
  detail: string | null;
  createdAt: string;
  settledAt: string | null;
  events: EventJson[];
}

interface Tracked {
  id: string;
  topic: string;
  title: string;
  from: string;
  to: string;
  seenEvents: number;
}

/** One move of a handoff, as `--verbose` and `--json` show it. */
export interface DemoTransition {
  readonly seq: bigint;
  readonly at: string;
  readonly handoff: string;
  readonly from: string;
  readonly to: string;
  readonly title: string;
  readonly event: string;
  /** The delivery state's move (the same state on both sides for a work event). */
  readonly state: { readonly from: string | null; readonly to: string };
  /** The work's move, on work events only. */
  readonly work: { readonly from: string | null; readonly to: string } | null;
}

/** A handoff that reached a settled state: the demo's one line per handoff. */
export interface DemoSettled {
  readonly seq: bigint;
  readonly handoff: string;
  readonly from: string;
  readonly to: string;
  readonly title: string;
  /** The settled delivery state: RETURNED, FAILED, CANCELLED, UNAVAILABLE, ACKNOWLEDGED or DUPLICATE. */
  readonly outcome: string;
  readonly settledAt: string;
  /** From send to settled. */
  readonly tookMs: number;
  /** How many times it waited because its recipient was mid-turn. */
  readonly busy: number;
  /** Why, for an outcome other than RETURNED (the handoff's detail), else null. */
  readonly detail: string | null;
}

/** What one look at the tracked handoffs found, each list in the order it happened. */
export interface DemoTick {
  readonly transitions: DemoTransition[];
  readonly settled: DemoSettled[];
}

/** An agent's display name (`planner` -> `Planner`). */
export const nameOf = (id: string) => DEMO_AGENTS.find((a) => a.id === id)?.name ?? id;

const SETTLED = new Set(['RETURNED', 'FAILED', 'CANCELLED', 'UNAVAILABLE', 'ACKNOWLEDGED', 'DUPLICATE']);

/**
 * Keeps work moving between the demo agents through the public API, the way an orchestrator
 * would: each returned handoff makes its recipient hand the topic on to the next agent. It
 * prints nothing: `tick()` returns what it saw, and demo-report.ts says it.
 */
export class DemoRelay {
  private readonly tracked = new Map<string, Tracked>();
  private topicIndex = 0;
  private sent = 0;

  constructor(private readonly client: ApiClient) {}

  /** Registers the four agents, calling `registered` after each. */
  async registerAgents(thinkMs: number, registered: (agent: (typeof DEMO_AGENTS)[number]) => void): Promise<void> {
    for (const a of DEMO_AGENTS) {
      await this.client.post('/v1/agents', { id: a.id, displayName: a.name, provider: 'demo', settings: { thinkMs } });
      registered(a);
    }
  }

  /** Starts `chains` independent relays at different agents, so agents sometimes get two at once (BUSY). */
  async start(chains: number): Promise<void> {
    for (let i = 0; i < chains; i++) {
      const from = DEMO_AGENTS[(i * 2) % DEMO_AGENTS.length]!;
      const topic = TOPICS[this.topicIndex++ % TOPICS.length]!;
      await this.hand(from.id, topic);
    }
    // One extra handoff to an agent that is already busy, to show BUSY right away.
    const busyTarget = DEMO_AGENTS[0];
    await this.hand(DEMO_AGENTS[DEMO_AGENTS.length - 1]!.id, TOPICS[this.topicIndex++ % TOPICS.length]!, busyTarget.next);
  }

  private async hand(from: string, topic: string, toOverride?: string): Promise<void> {
    const agent = DEMO_AGENTS.find((a) => a.id === from)!;
    const to = toOverride ?? agent.next;
    const verb = DEMO_AGENTS.find((a) => a.id === to)!.verb;
    const title = `${verb} ${topic}`;
    const { body } = await this.client.post<{ id: string }>('/v1/handoffs', {
      from,
      to,
      title,
      message: `${nameOf(from)} hands over: ${title}. Report back when done.`,
      context: { summary: `Relay on ${topic}`, nextSteps: [`${verb} ${topic}`] },
    });
    this.sent++;
    this.tracked.set(body.id, { id: body.id, topic, title, from, to, seenEvents: 0 });
  }

  /** Looks at every tracked handoff once: returns its new transitions and settlements, passes on returned work. */
  async tick(): Promise<DemoTick> {
    const transitions: DemoTransition[] = [];
    const settled: DemoSettled[] = [];
    const details = await Promise.all(
      [...this.tracked.values()].map(async (t) => ({ t, h: await this.client.get<HandoffDetail>(`/v1/handoffs/${t.id}`) })),
    );
    for (const { t, h } of details) {
      for (const e of h.events.slice(t.seenEvents)) {
        const work = e.workTo ? { from: e.workFrom ?? null, to: e.workTo } : null;
        transitions.push({
          seq: BigInt(e.seq),
          at: e.at,
          handoff: t.id,
          from: t.from,
          to: t.to,
          title: t.title,
          event: e.event,
          state: { from: e.from, to: e.to },
          work,
        });
      }
      t.seenEvents = h.events.length;
    }
    for (const { t, h } of details) {
      if (!SETTLED.has(h.state)) continue;
      this.tracked.delete(t.id);
      // The delivery move into the settled state; the last event stands in if there is none (it cannot be empty here).
      const settle = h.events.find((e) => e.to === h.state && e.from !== e.to) ?? h.events.at(-1)!;
      const settledAt = h.settledAt ?? settle.at;
      settled.push({
        seq: BigInt(settle.seq),
        handoff: t.id,
        from: t.from,
        to: t.to,
        title: t.title,
        outcome: h.state,
        settledAt,
        tookMs: Date.parse(settledAt) - Date.parse(h.createdAt),
        busy: h.events.filter((e) => e.to === 'BUSY' && e.from !== 'BUSY').length,
        detail: h.state === 'RETURNED' ? null : h.detail,
      });
      if (h.state === 'RETURNED') await this.hand(t.to, t.topic);
      else await this.hand(t.from, TOPICS[this.topicIndex++ % TOPICS.length]!);
    }
    const bySeq = (a: { seq: bigint }, b: { seq: bigint }) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0);
    return { transitions: transitions.sort(bySeq), settled: settled.sort(bySeq) };
  }

  /** Handoffs sent so far, and how many of them are still in flight. */
  counts(): { sent: number; inFlight: number } {
    return { sent: this.sent, inFlight: this.tracked.size };
  }
}
