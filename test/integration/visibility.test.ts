import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Who sees and does what, cell by cell. Every caller uses a real token: the sender, the
 * recipient (or, for unowned work, the agent that claimed it), another agent of the project,
 * an agent of another project, an admin with and without `all_owners`, and no token at all.
 * Every handoff is sent with the sender's own token, so the admin's "own" handoffs are none of
 * these.
 */
let baton: TestBaton;
const tokens: Record<string, string> = {};
let n = 0;

type Kind = 'owned' | 'unowned';
type Caller = 'sender' | 'recipient' | 'other' | 'foreign' | 'admin' | 'adminAll' | 'none';
const CALLERS: Caller[] = ['sender', 'recipient', 'other', 'foreign', 'admin', 'adminAll', 'none'];

/** The agent each caller is (for unowned work, "recipient" is the agent that claims it). */
const AGENT: Record<Kind, Partial<Record<Caller, string>>> = {
  owned: { sender: 's', recipient: 'r', other: 'o', foreign: 'f' },
  unowned: { sender: 's', recipient: 'c', other: 'o', foreign: 'f' },
};

function headers(caller: Caller, kind: Kind = 'owned'): Record<string, string> {
  if (caller === 'none') return { authorization: '' };
  if (caller === 'admin' || caller === 'adminAll') return { authorization: `Bearer ${baton.adminToken}` };
  return { authorization: `Bearer ${tokens[AGENT[kind][caller]!]}` };
}
const q = (caller: Caller) => (caller === 'adminAll' ? '?all_owners=true' : '');

/** A fresh piece of work from s, to r (owned) or to the project (unowned), at a stage. */
async function fresh(kind: Kind, stage: 'open' | 'claimed' | 'returned'): Promise<{ id: string; claimToken?: string }> {
  const sent = await baton.post(
    '/v1/handoffs',
    { to: kind === 'owned' ? 'r' : '@project', title: `work ${++n}`, message: `do ${n}` },
    headers('sender'),
  );
  expect(sent.status).toBe(201);
  const id = sent.body.id as string;
  if (stage === 'open') return { id };
  const claimant = AGENT[kind].recipient!;
  const claim = await baton.post(`/v1/handoffs/${id}/accept`, {}, { authorization: `Bearer ${tokens[claimant]}` });
  expect(claim.status).toBe(200);
  const claimToken = claim.body.claim.token as string;
  if (stage === 'claimed') return { id, claimToken };
  const returned = await baton.post(
    `/v1/handoffs/${id}/return`,
    { claimToken, summary: 'done' },
    { authorization: `Bearer ${tokens[claimant]}` },
  );
  expect(returned.status).toBe(200);
  return { id, claimToken };
}

/** What must not move when a call is refused: the row's revisions and its event count. */
async function footprint(id: string) {
  const { rows } = await baton.db.pool.query(
    `SELECT h.revision, h.work_revision, h.delivery_state, h.work_state, h.claim_token,
       (SELECT count(*)::int FROM handoff_events e WHERE e.handoff_id = h.id) AS events
     FROM handoffs h WHERE h.id = $1`,
    [id],
  );
  return rows[0];
}

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['s', 'r', 'o', 'c']) expect((await baton.post('/v1/agents', { id, provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/projects', { id: 'other' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'f', provider: 'manual' }, { 'x-baton-project': 'other' })).status).toBe(201);
  for (const id of ['s', 'r', 'o', 'c']) tokens[id] = await baton.tokenFor(id);
  tokens['f'] = await baton.tokenFor('f', 'other');
});

afterAll(async () => {
  await baton?.stop();
});

/** Expected status per caller; `code` the error code where it is refused. */
type Row = Record<Caller, number | [number, string]>;

const LIST: Record<Kind, Record<Caller, boolean | 401>> = {
  owned: { sender: true, recipient: true, other: false, foreign: false, admin: false, adminAll: true, none: 401 },
  unowned: { sender: true, recipient: true, other: true, foreign: false, admin: true, adminAll: true, none: 401 },
};

const READ: Record<Kind, Row> = {
  owned: {
    sender: 200,
    recipient: 200,
    other: [404, 'handoff_not_found'],
    foreign: [404, 'handoff_not_found'],
    admin: [404, 'handoff_not_found'],
    adminAll: 200,
    none: [401, 'unauthenticated'],
  },
  unowned: {
    sender: 200,
    recipient: 200,
    other: 200,
    foreign: [404, 'handoff_not_found'],
    admin: 200,
    adminAll: 200,
    none: [401, 'unauthenticated'],
  },
};

// Actions: an admin acts only in a role, naming the agent it acts for (the "as party" rows
// below); without one it is told to name one. all_owners widens what an admin reads, not
// what it may do, so adminAll acts like admin.
const NAME_ONE: [number, string] = [400, 'validation_failed'];
const HIDDEN: [number, string] = [404, 'handoff_not_found'];
const NO_TOKEN: [number, string] = [401, 'unauthenticated'];

const CLAIM: Record<Kind, Row> = {
  owned: {
    sender: [403, 'not_recipient'],
    recipient: 200,
    other: HIDDEN,
    foreign: HIDDEN,
    admin: NAME_ONE,
    adminAll: NAME_ONE,
    none: NO_TOKEN,
  },
  // Any agent of the project may claim unowned work (the sender too); only the first wins.
  unowned: { sender: 200, recipient: 200, other: 200, foreign: HIDDEN, admin: NAME_ONE, adminAll: NAME_ONE, none: NO_TOKEN },
};

const RETURN: Record<Kind, Row> = {
  owned: {
    sender: [409, 'claim_lost'],
    recipient: 200,
    other: HIDDEN,
    foreign: HIDDEN,
    admin: NAME_ONE,
    adminAll: NAME_ONE,
    none: NO_TOKEN,
  },
  unowned: {
    sender: [409, 'claim_lost'],
    recipient: 200,
    other: [409, 'claim_lost'],
    foreign: HIDDEN,
    admin: NAME_ONE,
    adminAll: NAME_ONE,
    none: NO_TOKEN,
  },
};

const CLOSE: Record<Kind, Row> = {
  owned: {
    sender: 200,
    recipient: [403, 'not_sender'],
    other: HIDDEN,
    foreign: HIDDEN,
    admin: NAME_ONE,
    adminAll: NAME_ONE,
    none: NO_TOKEN,
  },
  unowned: {
    sender: 200,
    recipient: [403, 'not_sender'],
    other: [403, 'not_sender'],
    foreign: HIDDEN,
    admin: NAME_ONE,
    adminAll: NAME_ONE,
    none: NO_TOKEN,
  },
};

const CANCEL: Record<Kind, Row> = CLOSE;

async function expectCell(what: string, res: { status: number; body: any }, want: number | [number, string], id: string, before: unknown) {
  const [status, code] = Array.isArray(want) ? want : [want, undefined];
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(status);
  if (code) {
    expect(res.body.error.code, what).toBe(code);
    // A refused call changes nothing.
    expect(await footprint(id), what).toEqual(before);
  }
}

describe('the visibility matrix', () => {
  for (const kind of ['owned', 'unowned'] as const) {
    describe(`${kind} handoffs`, () => {
      it('list: shown to exactly the callers who may see it', async () => {
        const { id } = await fresh(kind, 'open');
        for (const caller of CALLERS) {
          const res = await baton.get(`/v1/handoffs${q(caller)}`, headers(caller, kind));
          const want = LIST[kind][caller];
          if (want === 401) {
            expect(res.status, caller).toBe(401);
            continue;
          }
          expect(res.status, caller).toBe(200);
          expect(
            res.body.items.some((h: any) => h.id === id),
            `${kind} listed for ${caller}`,
          ).toBe(want);
        }
      });

      it('read: 200 in full, or 404 exactly as if it did not exist', async () => {
        const { id } = await fresh(kind, 'open');
        const before = await footprint(id);
        for (const caller of CALLERS) {
          const res = await baton.get(`/v1/handoffs/${id}${q(caller)}`, headers(caller, kind));
          await expectCell(`${kind} read by ${caller}`, res, READ[kind][caller], id, before);
          if (res.status === 200) expect(res.body.events.length, caller).toBeGreaterThan(0);
          if (res.status === 404) {
            // Indistinguishable from an id that never existed.
            const missing = await baton.get(`/v1/handoffs/00000000-0000-7000-8000-00000000dead`, headers(caller));
            expect(res.body.error.message.replace(id, 'X')).toBe(
              missing.body.error.message.replace('00000000-0000-7000-8000-00000000dead', 'X'),
            );
          }
        }
      });

      it('claim', async () => {
        for (const caller of CALLERS) {
          const { id } = await fresh(kind, 'open');
          const before = await footprint(id);
          await expectCell(
            `${kind} claimed by ${caller}`,
            await baton.post(`/v1/handoffs/${id}/accept${q(caller)}`, {}, headers(caller, kind)),
            CLAIM[kind][caller],
            id,
            before,
          );
        }
      });

      it('return (with the real claim token in hand)', async () => {
        for (const caller of CALLERS) {
          const { id, claimToken } = await fresh(kind, 'claimed');
          const before = await footprint(id);
          const res = await baton.post(
            `/v1/handoffs/${id}/return${q(caller)}`,
            { claimToken, summary: `returned by ${caller}` },
            headers(caller, kind),
          );
          await expectCell(`${kind} returned by ${caller}`, res, RETURN[kind][caller], id, before);
        }
      });

      it('close', async () => {
        for (const caller of CALLERS) {
          const { id } = await fresh(kind, 'returned');
          const before = await footprint(id);
          const res = await baton.post(`/v1/handoffs/${id}/close${q(caller)}`, { resolution: 'accepted' }, headers(caller, kind));
          await expectCell(`${kind} closed by ${caller}`, res, CLOSE[kind][caller], id, before);
        }
      });

      it('cancel', async () => {
        for (const caller of CALLERS) {
          const { id } = await fresh(kind, 'open');
          const before = await footprint(id);
          await expectCell(
            `${kind} cancelled by ${caller}`,
            await baton.post(`/v1/handoffs/${id}/cancel${q(caller)}`, {}, headers(caller, kind)),
            CANCEL[kind][caller],
            id,
            before,
          );
        }
      });

      it('an admin acting as the right party may do each of them', async () => {
        const admin = headers('admin');
        const party = AGENT[kind].recipient!;
        const a = await fresh(kind, 'open');
        expect((await baton.post(`/v1/handoffs/${a.id}/accept`, { as: party }, admin)).status).toBe(200);
        const b = await fresh(kind, 'claimed');
        expect(
          (await baton.post(`/v1/handoffs/${b.id}/return`, { as: party, claimToken: b.claimToken, summary: 'by the admin' }, admin)).status,
        ).toBe(200);
        const c = await fresh(kind, 'returned');
        expect((await baton.post(`/v1/handoffs/${c.id}/close`, { as: 's', resolution: 'accepted' }, admin)).status).toBe(200);
        const d = await fresh(kind, 'open');
        expect((await baton.post(`/v1/handoffs/${d.id}/cancel`, { as: 's' }, admin)).status).toBe(200);
        // ...but acting as an agent that is no party to owned work, it sees what that agent sees.
        if (kind === 'owned') {
          const e = await fresh(kind, 'open');
          expect((await baton.post(`/v1/handoffs/${e.id}/accept`, { as: 'o' }, admin)).status).toBe(404);
        }
      });
    });
  }
});

describe('all_owners', () => {
  it('is refused with 403 and no data for anyone but an admin', async () => {
    for (const caller of ['sender', 'recipient', 'other', 'foreign'] as const) {
      for (const path of [
        '/v1/handoffs?all_owners=true',
        '/v1/status?all_owners=true',
        '/v1/board?all_owners=true',
        '/v1/sessions/00000000-0000-7000-8000-00000000dead?all_owners=true',
      ]) {
        const res = await baton.get(path, headers(caller));
        expect(res.status, `${caller} ${path}`).toBe(403);
        expect(res.body, `${caller} ${path}`).toEqual({ error: { code: 'forbidden', message: expect.any(String) } });
      }
    }
  });
});

describe('counts and the board agree with the listings', () => {
  it('for every caller, /v1/status counts exactly what /v1/handoffs lists, and the board shows nothing the listing hides', async () => {
    await fresh('owned', 'open');
    await fresh('owned', 'returned');
    await fresh('unowned', 'claimed');
    // A handoff between two other agents: visible only to them (and to all_owners).
    const hidden = await baton.post('/v1/handoffs', { to: 'c', title: 'private', message: 'between o and c' }, headers('other'));
    expect(hidden.status).toBe(201);
    for (const caller of ['sender', 'recipient', 'other', 'foreign', 'admin', 'adminAll'] as const) {
      const listed = new Set<string>();
      let cursor: string | null = null;
      do {
        const params = new URLSearchParams({
          limit: '200',
          ...(caller === 'adminAll' ? { all_owners: 'true' } : {}),
          ...(cursor ? { cursor } : {}),
        });
        const page: { status: number; body: any } = await baton.get(`/v1/handoffs?${params}`, headers(caller));
        expect(page.status, caller).toBe(200);
        for (const h of page.body.items) listed.add(h.id);
        cursor = page.body.nextCursor;
      } while (cursor);
      const status = await baton.get(`/v1/status${q(caller)}`, headers(caller));
      expect(status.body.total, `${caller}: count = listing`).toBe(listed.size);
      const board = await baton.get(`/v1/board${q(caller)}`, headers(caller));
      const onBoard = Object.values(board.body as Record<string, Array<{ handoff: { id: string } }>>)
        .flat()
        .map((c) => c.handoff.id);
      for (const id of onBoard) expect(listed.has(id), `${caller}: board card ${id} is listed`).toBe(true);
      expect(listed.has(hidden.body.id), `${caller} sees o->c`).toBe(caller === 'other' || caller === 'adminAll');
    }
  });
});

describe('sessions', () => {
  it("a session lists only the handoffs the caller may see: A->B's owned work to A, B and an all_owners admin, never to a bystander or a plain admin", async () => {
    const created = await baton.post('/v1/sessions', { title: 'shared task' }, headers('sender'));
    expect(created.status).toBe(201);
    const sid = created.body.id as string;
    const send = async (caller: Caller, to: string, title: string) => {
      const res = await baton.post('/v1/handoffs', { to, title, message: title, session: sid }, headers(caller));
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const owned = await send('sender', 'r', 'owned s->r');
    const unowned = await send('sender', '@project', 'unowned from s');
    const between = await send('other', 'c', 'owned o->c');
    const want: Record<'sender' | 'recipient' | 'other' | 'admin' | 'adminAll', string[]> = {
      sender: [owned, unowned],
      recipient: [owned, unowned],
      other: [unowned, between],
      admin: [unowned],
      adminAll: [owned, unowned, between],
    };
    for (const caller of ['sender', 'recipient', 'other', 'admin', 'adminAll'] as const) {
      const res = await baton.get(`/v1/sessions/${sid}${q(caller)}`, headers(caller));
      expect(res.status, caller).toBe(200);
      const shown = res.body.handoffs.map((h: any) => h.id);
      expect(shown, `${caller} sees exactly these handoffs of the session`).toEqual(want[caller]);
      // Nothing of a hidden handoff leaks through another field (its title, say).
      if (!want[caller].includes(owned)) expect(JSON.stringify(res.body), caller).not.toContain('owned s->r');
      // The same rule as the listing.
      const listed = await baton.get(`/v1/handoffs?limit=200${caller === 'adminAll' ? '&all_owners=true' : ''}`, headers(caller));
      expect(
        listed.body.items
          .filter((h: any) => h.sessionId === sid)
          .map((h: any) => h.id)
          .sort(),
        `${caller}: session = listing`,
      ).toEqual([...shown].sort());
    }
    const foreign = await baton.get(`/v1/sessions/${sid}`, headers('foreign'));
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('session_not_found');
    expect((await baton.get(`/v1/sessions/${sid}`, headers('none'))).status).toBe(401);
  });
});

describe('every other place that returns a handoff', () => {
  it('the context packet of an owned handoff is 404 to a bystander and a plain admin, like the handoff itself', async () => {
    const { id } = await fresh('owned', 'open');
    for (const caller of CALLERS) {
      const res = await baton.get(`/v1/handoffs/${id}/packet${q(caller)}`, headers(caller));
      const want = READ.owned[caller];
      expect(res.status, `packet for ${caller}`).toBe(Array.isArray(want) ? want[0] : want);
      if (res.status === 200) expect(res.body.text).toContain(id);
    }
  });

  it('an admin reading an inbox or outbox sees owned handoffs only with all_owners', async () => {
    const { id } = await fresh('owned', 'open');
    for (const [box, agent] of [
      ['outbox', 's'],
      ['inbox', 'r'],
    ] as const) {
      const plain = await baton.get(`/v1/agents/${agent}/${box}`, headers('admin'));
      expect(plain.status).toBe(200);
      expect(
        plain.body.handoffs.some((h: any) => h.id === id),
        `${box} of ${agent} for a plain admin`,
      ).toBe(false);
      const all = await baton.get(`/v1/agents/${agent}/${box}?all_owners=true`, headers('adminAll'));
      expect(
        all.body.handoffs.some((h: any) => h.id === id),
        `${box} of ${agent} with all_owners`,
      ).toBe(true);
    }
  });

  it('an operator release of an owned handoff is 404 without all_owners, changes nothing, and works with it', async () => {
    const { id } = await fresh('owned', 'claimed');
    const before = await footprint(id);
    const hidden = await baton.post(`/v1/handoffs/${id}/release`, { reason: 'stuck' }, headers('admin'));
    await expectCell('operator release without all_owners', hidden, HIDDEN, id, before);
    const released = await baton.post(`/v1/handoffs/${id}/release?all_owners=true`, { reason: 'stuck' }, headers('adminAll'));
    expect(released.status, JSON.stringify(released.body)).toBe(200);
    expect(released.body.state).toBe('CANCELLED');
    // all_owners stays an admin's: an agent asking for it is refused.
    expect((await baton.post(`/v1/handoffs/${id}/release?all_owners=true`, {}, headers('sender'))).status).toBe(403);
  });
});

describe('inboxes and outboxes', () => {
  it('an agent reads its own; naming another is refused; an admin reads any', async () => {
    for (const box of ['inbox', 'outbox']) {
      expect((await baton.get(`/v1/agents/r/${box}`, headers('recipient'))).status).toBe(200);
      const other = await baton.get(`/v1/agents/s/${box}`, headers('recipient'));
      expect(other.status).toBe(403);
      expect(other.body.error.code).toBe('forbidden');
      expect((await baton.get(`/v1/agents/s/${box}`, headers('admin'))).status).toBe(200);
    }
  });
});

describe('responses that depend on the caller', () => {
  it('carry Cache-Control: private, no-store (refusals too); health does not need a token', async () => {
    const { id } = await fresh('owned', 'open');
    for (const [path, caller] of [
      ['/v1/handoffs', 'sender'],
      [`/v1/handoffs/${id}`, 'recipient'],
      [`/v1/handoffs/${id}`, 'other'],
      ['/v1/status', 'none'],
    ] as const) {
      const res = await baton.app.inject({ method: 'GET', url: path, headers: headers(caller).authorization ? headers(caller) : {} });
      expect(res.headers['cache-control'], `${path} as ${caller}`).toBe('private, no-store');
    }
    expect((await baton.app.inject({ method: 'GET', url: '/v1/health' })).statusCode).toBe(200);
  });
});
