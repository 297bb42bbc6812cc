import type { DeliveryWindows } from '../domain/delivery-policy.ts';
import { holdReason, type RuntimeSettings } from '../domain/runtime-settings.ts';
import { routeOf } from '../queue/dispatch-job.ts';
import { JOB_IDS } from '../queue/redis-names.ts';
import type { CoreDeps } from './ports.ts';

/*
 * Routing by role (issue 34). A handoff sent to `@role:<name>` is stored with its role and no
 * recipient (send-handoff.ts). It is bound to one agent at dispatch time, never at send time:
 *
 * - a push agent binds one for itself when its dispatch run, holding the agent's turn lock,
 *   finds its own queue empty and the agent idle (no handoff to it in an open state):
 *   `bindRoleWork`, called by dispatch-agent.ts. So the idle members take the work first, and
 *   when none is idle the handoff waits unbound until the first member's queue frees: the one
 *   whose queue frees soonest is by construction the one that binds it, with no guess at turn
 *   lengths. Only idle agents bind, so a binding never queues behind another turn;
 * - a pull (`manual`) agent has no dispatch run: the reconciler's `routes` step binds one to
 *   each idle manual member (`routeRoles`), and the agent finds it in its inbox and claims it
 *   like any handoff to it (work-contract.ts: exactly once);
 * - the same step routes again (`rerouted`) every binding older than
 *   `DeliveryWindows.roleRerouteAfterMs` that no turn has reached, and wakes idle push members
 *   when unbound role work waits (a lost wake-up, a rerouted handoff). A removed agent's bindings
 *   that no turn reached are routed again by the removal itself (libs/db agents.remove).
 *
 * The pick (libs/db/handoff-sql/role-routing.ts) is fair across senders: the sender with the
 * fewest of its role handoffs bound and open goes first, then send order. Never to its sender,
 * a removed agent, an agent of another deployment, or one the sender may not reach (blocked,
 * or not allowed when connections are restricted); nothing is bound while delivery is paused.
 * Every binding is one conditional statement (still unbound, at the revision read, SKIP LOCKED),
 * so workers racing for one handoff bind it once, and it appends `routed` with the candidates.
 */

/** What binding touches: the routing statements, the runtime settings, the clock and the event publisher. */
export type BindDeps = Pick<CoreDeps, 'routing' | 'deployment' | 'clock' | 'events'> & {
  readonly settingsReader: { get(): Promise<RuntimeSettings> };
};

/**
 * For a dispatch run whose agent's queue is empty, under the agent's turn lock: binds one
 * waiting role handoff to the agent when it is an idle member of that role. True when one was
 * bound (the run then reads its head again and delivers it as any handoff to the agent).
 * Nothing is bound while delivery is paused (it would only be HELD here).
 */
export async function bindRoleWork(deps: BindDeps, agentId: string): Promise<boolean> {
  if (!(await deps.routing.declaresRoles(agentId))) return false;
  const settings = await deps.settingsReader.get();
  const now = deps.clock.now();
  if (holdReason({ ...settings, connections: 'open' }, null, now) !== null) return false;
  const bound = await deps.routing.bind({
    agentId,
    deployment: deps.deployment,
    at: now,
    restricted: settings.connections === 'restricted',
  });
  if (!bound) return false;
  deps.events.published([bound.eventId]);
  return true;
}

/** What the reconciler's `routes` step touches. */
export type RouteRolesDeps = BindDeps &
  Pick<CoreDeps, 'scheduler' | 'logger'> & { readonly windows: Pick<DeliveryWindows, 'roleRerouteAfterMs'> };

/** Bindings, idle members and wake-ups one pass handles at most. */
export const ROUTE_PASS_LIMIT = 500;

/**
 * The reconciler's `routes` step: routes again every stale binding no turn reached, binds a
 * waiting role handoff to each idle pull member, and wakes each idle push member for which one
 * waits (its dispatch run binds it). Returns how many handoffs it rerouted or bound.
 */
export async function routeRoles(deps: RouteRolesDeps, sweep = 0): Promise<number> {
  const now = deps.clock.now();
  const rerouted = await deps.routing.rerouteStale({
    before: new Date(now.getTime() - deps.windows.roleRerouteAfterMs),
    at: now,
    limit: ROUTE_PASS_LIMIT,
  });
  deps.events.published(rerouted);
  const settings = await deps.settingsReader.get();
  const restricted = settings.connections === 'restricted';
  const idle = await deps.routing.idleMembers({ deployment: deps.deployment, at: now, restricted, limit: ROUTE_PASS_LIMIT });
  let bound = 0;
  const wake: typeof idle = [];
  for (const m of idle) {
    if (m.provider !== 'manual') {
      wake.push(m);
      continue;
    }
    const b = await deps.routing.bind({ agentId: m.agentId, deployment: deps.deployment, at: now, restricted });
    if (!b) continue;
    deps.events.published([b.eventId]);
    bound++;
  }
  await Promise.all(
    wake.map((m) =>
      deps.scheduler.enqueue(
        { ...routeOf({ recipientId: m.agentId, provider: m.provider, pool: m.pool }), cause: 'sweep' },
        JOB_IDS.sweep(m.agentId, sweep),
      ),
    ),
  );
  return rerouted.length + bound;
}
