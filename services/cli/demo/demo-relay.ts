import type { ApiClient } from '../api-client.ts';

/** The four simulated agents of the demo, and who each hands work to next. */
export const DEMO_AGENTS = [
  { id: 'planner', name: 'Planner', next: 'engineer', verb: 'Plan what follows' },
  { id: 'engineer', name: 'Engineer', next: 'reviewer', verb: 'Implement' },
  { id: 'reviewer', name: 'Reviewer', next: 'writer', verb: 'Review' },
  { id: 'writer', name: 'Writer', next: 'planner', verb: 'Document' },
] as const;

const TOPICS = ['the login page', 'rate limiting', 'the CSV export', 'search ranking', 'the billing webhook', 'dark mode', 'the audit log', 'retry budgets'];

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

const SETTLED = new Set(['RETURNED', 'FAILED', 'CANCELLED', 'UNAVAILABLE', 'ACKNOWLEDGED', 'DUPLICATE']);

/**
 * A delivery move (`SENDING -> ACCEPTED`), with the work's move beside it when both changed; a
 * work event that leaves the delivery state as it was shows the work's move only (never `RETURNED -> RETURNED`).
 */
function transition(e: EventJson): string {
  const work = e.workTo ? `work ${e.workFrom ?? 'new'} -> ${e.workTo}` : '';
  if (e.from === e.to && work) return `${work} (${e.event})`;
  const delivery = `${(e.from ?? 'new').padEnd(8)} -> ${e.to}`;
  return work ? `${delivery}  (${work})` : delivery;
}

const nameOf = (id: string) => DEMO_AGENTS.find((a) => a.id === id)?.name ?? id;

/**
 * Keeps work moving between the demo agents through the public API, the way an orchestrator
 * would: each returned handoff makes its recipient hand the topic on to the next agent. Prints
 * every transition it sees.
 */
export class DemoRelay {
  private readonly tracked = new Map<string, Tracked>();
  private topicIndex = 0;
  private sent = 0;
  private returned = 0;

  constructor(
    private readonly client: ApiClient,
    private readonly out: (line: string) => void,
    /** `baton demo --json`: one object per line instead of the text lines. */
    private readonly emit?: (record: Record<string, unknown>) => void,
  ) {}

  async registerAgents(thinkMs: number): Promise<void> {
    for (const a of DEMO_AGENTS) {
      await this.client.post('/v1/agents', { id: a.id, displayName: a.name, provider: 'demo', settings: { thinkMs } });
      if (this.emit) this.emit({ type: 'agent_registered', agent: a.id, name: a.name, thinkMs });
      else this.out(`  registered ${a.name} (simulated agent, ${thinkMs} ms per turn)`);
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
    const busyTarget = DEMO_AGENTS[0]!;
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

  /** Looks at every tracked handoff once: prints new transitions, passes on returned work. */
  async tick(): Promise<void> {
    const lines: Array<{ seq: bigint; text: string; record: Record<string, unknown> }> = [];
    const details = await Promise.all([...this.tracked.values()].map(async (t) => ({ t, h: await this.client.get<HandoffDetail>(`/v1/handoffs/${t.id}`) })));
    for (const { t, h } of details) {
      for (const e of h.events.slice(t.seenEvents)) {
        const time = e.at.slice(11, 19);
        lines.push({
          seq: BigInt(e.seq),
          text: `${time}  ${`${nameOf(t.from)} -> ${nameOf(t.to)}`.padEnd(22)} ${`"${t.title}"`.padEnd(40)} ${transition(e)}`,
          record: { type: 'transition', at: e.at, handoff: t.id, from: t.from, to: t.to, title: t.title, event: e.event, state: { from: e.from, to: e.to }, work: e.workTo ? { from: e.workFrom ?? null, to: e.workTo } : null },
        });
      }
      t.seenEvents = h.events.length;
    }
    lines.sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
    for (const line of lines) {
      if (this.emit) this.emit(line.record);
      else this.out(line.text);
    }
    for (const { t, h } of details) {
      if (SETTLED.has(h.state)) {
        this.tracked.delete(t.id);
        if (h.state === 'RETURNED') {
          this.returned++;
          await this.hand(t.to, t.topic);
        } else {
          await this.hand(t.from, TOPICS[this.topicIndex++ % TOPICS.length]!);
        }
      }
    }
  }

  summary(): string {
    return `sent ${this.sent}, returned ${this.returned}, in flight ${this.tracked.size}`;
  }

  /** The summary's figures. */
  counts(): { sent: number; returned: number; inFlight: number } {
    return { sent: this.sent, returned: this.returned, inFlight: this.tracked.size };
  }
}
