import { BatonError } from '../domain/errors.ts';
import { buildContextPacket, type ContextPacket } from '../domain/context-packet.ts';
import { isUuid, newId } from '../domain/ids.ts';
import { LIMITS } from '../domain/limits.ts';
import type { HandoffRecord } from '../db/records.ts';
import type { FactKindName, FactRecord, SessionHandoff, SessionRecord, SessionSummary } from '../db/session-repository.ts';
import type { Viewer } from '../domain/visibility.ts';
import type { CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';

/** What the session use cases read: the project and agent (`agents`), and the sessions and facts. */
export type SessionDeps = Pick<CoreDeps, 'agents' | 'sessions'>;

async function agentIn(deps: Pick<CoreDeps, 'agents'>, projectId: string, projectSlug: string, handle: string) {
  const agent = await deps.agents.findActive(projectId, handle.toLowerCase());
  if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${projectSlug}`);
  return agent;
}

/**
 * Starts a tracked session: the work of one task across agents.
 * @throws BatonError project_not_found, agent_not_found
 */
export async function createSession(
  deps: SessionDeps & Pick<CoreDeps, 'clock'>,
  input: { project: string; as: string; title: string; summary?: string | null | undefined },
): Promise<SessionRecord> {
  const project = await resolveProject(deps, input.project);
  await agentIn(deps, project.id, project.slug, input.as);
  const at = deps.clock.now();
  return deps.sessions.create({ id: newId(at.getTime()), projectId: project.id, title: input.title, summary: input.summary ?? null, at });
}

async function sessionIn(deps: Pick<CoreDeps, 'sessions'>, projectId: string, id: string): Promise<SessionRecord> {
  const session = isUuid(id) ? await deps.sessions.find(id) : null;
  if (!session || session.projectId !== projectId)
    throw new BatonError('session_not_found', `no session ${JSON.stringify(id)} in this project`);
  return session;
}

/**
 * Records a fact (decision, failed attempt, lesson, open question, note, result) in a session,
 * by the agent that knows it. Facts are never edited: `supersedes` names an older fact of the
 * same session that this one replaces.
 * @throws BatonError project_not_found, agent_not_found, session_not_found, fact_not_found, too_many_facts
 */
export async function addFact(
  deps: SessionDeps & Pick<CoreDeps, 'clock'>,
  input: { project: string; sessionId: string; as: string; kind: FactKindName; text: string; supersedes?: string | null | undefined },
): Promise<FactRecord> {
  const project = await resolveProject(deps, input.project);
  const author = await agentIn(deps, project.id, project.slug, input.as);
  const session = await sessionIn(deps, project.id, input.sessionId);
  if (input.supersedes) {
    const [old] = await deps.sessions.factsByIds(isUuid(input.supersedes) ? [input.supersedes] : []);
    if (!old || old.sessionId !== session.id)
      throw new BatonError('fact_not_found', `no fact ${JSON.stringify(input.supersedes)} in session ${session.id}`);
  }
  const at = deps.clock.now();
  const id = newId(at.getTime());
  const added = await deps.sessions.addFact(
    {
      id,
      sessionId: session.id,
      projectId: project.id,
      authorId: author.id,
      kind: input.kind,
      text: input.text,
      supersedesId: input.supersedes ?? null,
      at,
    },
    LIMITS.factsPerSession,
  );
  if (!added)
    throw new BatonError('too_many_facts', `session ${session.id} already holds ${LIMITS.factsPerSession} facts, the most it may`);
  const [fact] = await deps.sessions.factsByIds([id]);
  return fact!;
}

export interface SessionDetail {
  session: SessionRecord;
  facts: FactRecord[];
  handoffs: SessionHandoff[];
}

/**
 * A session with all its facts (superseded ones marked) and the handoffs that point at it that
 * the viewer may see: the session is the project's, an owned handoff in it stays its sender's
 * and recipient's (libs/domain/visibility.ts).
 * @throws BatonError project_not_found, session_not_found
 */
export async function showSession(deps: SessionDeps, projectSlug: string, id: string, viewer: Viewer): Promise<SessionDetail> {
  const project = await resolveProject(deps, projectSlug);
  const session = await sessionIn(deps, project.id, id);
  const [facts, handoffs] = await Promise.all([deps.sessions.facts(session.id), deps.sessions.handoffs(session.id, viewer)]);
  return { session, facts, handoffs };
}

/**
 * The project's newest `limit` sessions, newest first, with how many facts each holds and how
 * many of its handoffs the viewer may see: sessions are the project's, like `showSession`.
 * @throws BatonError project_not_found
 */
export async function listSessions(deps: SessionDeps, projectSlug: string, viewer: Viewer, limit: number): Promise<SessionSummary[]> {
  const project = await resolveProject(deps, projectSlug);
  return deps.sessions.list(project.id, viewer, limit);
}

/**
 * The bounded context packet for a handoff, built from the handoff and (when it points at one)
 * its session's newest facts. Used on accept and in the delivered turn.
 */
export async function contextPacketFor(deps: Pick<CoreDeps, 'sessions'>, h: HandoffRecord, from: string): Promise<ContextPacket> {
  const session = h.sessionId ? await deps.sessions.find(h.sessionId) : null;
  const facts = session ? await deps.sessions.facts(session.id) : [];
  return buildContextPacket({
    handoffId: h.id,
    title: h.title,
    from,
    summary: h.contextSummary,
    focus: h.focus,
    doneWhen: h.doneWhen,
    openQuestions: h.openQuestions,
    nextSteps: h.nextSteps,
    session: session ? { id: session.id, title: session.title, summary: session.summary } : null,
    // A note the sender left when sending the work back (it is not closed yet).
    revisionNote: h.closeNote !== null && h.workResolution === null ? h.closeNote : null,
    facts: facts.map((f) => ({
      id: f.id,
      kind: f.kind,
      text: f.text,
      author: f.authorHandle,
      createdAt: f.createdAt,
      supersededBy: f.supersededById,
    })),
  });
}
