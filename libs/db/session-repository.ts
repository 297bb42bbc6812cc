import type { Viewer } from '../domain/visibility.ts';
import type { PrismaClient } from './generated/prisma/client.ts';
import { visibleSql } from './visible-sql.ts';

export type FactKindName = 'decision' | 'failed_attempt' | 'lesson' | 'open_question' | 'note' | 'result';

export interface SessionRecord {
  id: string;
  projectId: string;
  title: string;
  summary: string | null;
  createdAt: Date;
}

/** A session as the project's list shows it, with how much it holds. */
export interface SessionSummary {
  id: string;
  title: string;
  summary: string | null;
  createdAt: Date;
  /** Every fact of the session, superseded ones included. */
  facts: number;
  /** The handoffs pointing at the session that the viewer may see. */
  handoffs: number;
}

/** A handoff as a session lists it. */
export interface SessionHandoff {
  id: string;
  title: string | null;
  from: string;
  to: string | null;
  deliveryState: string;
  workState: string | null;
  createdAt: Date;
}

export interface FactRecord {
  id: string;
  sessionId: string;
  projectId: string;
  authorId: string;
  authorHandle: string;
  kind: FactKindName;
  text: string;
  supersedesId: string | null;
  supersededById: string | null;
  createdAt: Date;
}

type FactRow = Omit<FactRecord, 'authorHandle' | 'supersededById'> & { author: { handle: string } };

function toFact(r: FactRow, supersededById: string | null): FactRecord {
  return {
    id: r.id,
    sessionId: r.sessionId,
    projectId: r.projectId,
    authorId: r.authorId,
    authorHandle: r.author.handle,
    kind: r.kind,
    text: r.text,
    supersedesId: r.supersedesId,
    supersededById,
    createdAt: r.createdAt,
  };
}

/** Tracked sessions and their facts, through Prisma (not on the delivery hot path). */
export class SessionRepository {
  constructor(private readonly prisma: PrismaClient) {}

  async create(s: { id: string; projectId: string; title: string; summary: string | null; at: Date }): Promise<SessionRecord> {
    return this.prisma.session.create({
      data: { id: s.id, projectId: s.projectId, title: s.title, summary: s.summary, createdAt: s.at },
      select: { id: true, projectId: true, title: true, summary: true, createdAt: true },
    });
  }

  async find(id: string): Promise<SessionRecord | null> {
    return this.prisma.session.findUnique({
      where: { id },
      select: { id: true, projectId: true, title: true, summary: true, createdAt: true },
    });
  }

  /** Every fact of the session, oldest first, with who wrote it and what superseded it. */
  async facts(sessionId: string): Promise<FactRecord[]> {
    const rows = await this.prisma.fact.findMany({
      where: { sessionId },
      orderBy: { createdAt: 'asc' },
      include: { author: { select: { handle: true } }, supersededBy: { select: { id: true }, orderBy: { createdAt: 'asc' }, take: 1 } },
    });
    return rows.map((r) => toFact(r, r.supersededBy[0]?.id ?? null));
  }

  async factsByIds(ids: readonly string[]): Promise<FactRecord[]> {
    if (ids.length === 0) return [];
    const rows = await this.prisma.fact.findMany({ where: { id: { in: [...ids] } }, include: { author: { select: { handle: true } } } });
    return rows.map((r) => toFact(r, null));
  }

  /**
   * Adds the fact unless the session already holds `max` facts (false then, nothing written).
   * The session row is locked first, so concurrent writers cannot overshoot the cap.
   */
  async addFact(
    f: {
      id: string;
      sessionId: string;
      projectId: string;
      authorId: string;
      kind: FactKindName;
      text: string;
      supersedesId: string | null;
      at: Date;
    },
    max: number,
  ): Promise<boolean> {
    return this.prisma.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT 1 FROM sessions WHERE id = ${f.sessionId}::uuid FOR UPDATE`;
      const [held] = await tx.$queryRaw<Array<{ n: number }>>`SELECT count(*)::int AS n FROM facts WHERE session_id = ${f.sessionId}::uuid`;
      if ((held?.n ?? 0) >= max) return false;
      await tx.fact.create({
        data: {
          id: f.id,
          sessionId: f.sessionId,
          projectId: f.projectId,
          authorId: f.authorId,
          kind: f.kind,
          text: f.text,
          supersedesId: f.supersedesId,
          createdAt: f.at,
        },
      });
      return true;
    });
  }

  /**
   * The project's newest `limit` sessions, newest first, each with its fact count and the count
   * of its handoffs the viewer may see (one scan of the project's handoffs, whatever the page).
   */
  async list(projectId: string, viewer: Viewer, limit: number): Promise<SessionSummary[]> {
    const params: unknown[] = [projectId, limit];
    const visible = visibleSql(viewer, params);
    return this.prisma.$queryRawUnsafe<SessionSummary[]>(
      `WITH page AS (
         SELECT s.id, s.title, s.summary, s.created_at FROM sessions s WHERE s.project_id = $1::uuid ORDER BY s.created_at DESC, s.id DESC LIMIT $2
       )
       SELECT page.id, page.title, page.summary, page.created_at AS "createdAt", coalesce(f.n, 0) AS facts, coalesce(hc.n, 0) AS handoffs
       FROM page
       LEFT JOIN (SELECT session_id, count(*)::int AS n FROM facts WHERE session_id IN (SELECT id FROM page) GROUP BY session_id) f ON f.session_id = page.id
       LEFT JOIN (
         SELECT h.session_id, count(*)::int AS n FROM handoffs h
         WHERE h.project_id = $1::uuid AND h.session_id IN (SELECT id FROM page) AND ${visible} GROUP BY h.session_id
       ) hc ON hc.session_id = page.id
       ORDER BY page.created_at DESC, page.id DESC`,
      ...params,
    );
  }

  /**
   * Handoffs pointing at the session that the viewer may see (the rule of
   * libs/domain/visibility.ts, in SQL), oldest first: a session is shared by its project, the
   * owned handoffs in it are not.
   */
  async handoffs(sessionId: string, viewer: Viewer): Promise<SessionHandoff[]> {
    const params: unknown[] = [sessionId];
    const visible = visibleSql(viewer, params);
    return this.prisma.$queryRawUnsafe<SessionHandoff[]>(
      `SELECT h.id, h.title, s.handle AS "from", r.handle AS "to", h.delivery_state::text AS "deliveryState",
         h.work_state::text AS "workState", h.created_at AS "createdAt"
       FROM handoffs h JOIN agents s ON s.id = h.sender_id LEFT JOIN agents r ON r.id = h.recipient_id
       WHERE h.session_id = $1::uuid AND ${visible}
       ORDER BY h.seq`,
      ...params,
    );
  }
}
