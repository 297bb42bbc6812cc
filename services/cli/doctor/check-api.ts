import { ApiClient, ApiError, ApiTimeout, ApiUnreachable } from '../../../libs/api-client/api-client.ts';
import type { CliConnection } from '../cli-context.ts';
import { fail, ok, reasonOf, warn, type DoctorCheck } from './doctor-check.ts';
import type { DoctorAgent } from './provider-checks.ts';

/** What `checkApi` found: its lines, and the agents the token may list (when asked for and possible). */
export interface ApiFindings {
  readonly checks: DoctorCheck[];
  readonly agents: DoctorAgent[] | null;
}

interface AgentItem {
  readonly id: string;
  readonly provider: string;
  readonly settings: Record<string, unknown>;
}

const NEW_TOKEN =
  'write a profile with `baton init` (an admin, on the Baton host) or `baton token create --agent <id> --profile`, or set BATON_TOKEN';

function tokenSource(conn: CliConnection): string {
  return conn.tokenFrom === 'env' ? 'BATON_TOKEN' : `the profile ${conn.profilePath}`;
}

function apiFailure(err: unknown, url: string): DoctorCheck {
  if (err instanceof ApiUnreachable) {
    const cause = err.cause;
    const reason = cause instanceof ApiTimeout ? `no answer within ${cause.timeoutMs} ms` : reasonOf(cause);
    return fail(
      'api',
      `cannot reach Baton at ${url} (${reason})`,
      "start it (`baton serve`, or `baton api`), or point BATON_URL, --url or the profile's url at it",
    );
  }
  if (err instanceof ApiError && err.status === 503) {
    return fail(
      'api',
      `Baton at ${url} answers but is not ready: its Postgres or Redis does not answer`,
      `\`curl ${url}/v1/ready\` names which; see the API's log`,
    );
  }
  if (err instanceof ApiError)
    return fail(
      'api',
      `something answers at ${url}, but not as Baton does (${err.code}: ${err.message} on /v1/ready)`,
      "point BATON_URL, --url or the profile's url at Baton's API",
    );
  return fail('api', `asking ${url} failed: ${reasonOf(err)}`, "point BATON_URL, --url or the profile's url at Baton's API");
}

/** Every active agent the token may list: an admin's in every project, an agent token's in its own. */
async function listAgents(conn: CliConnection, client: ApiClient, admin: boolean, timeoutMs: number): Promise<DoctorAgent[]> {
  const projects = admin ? (await client.get<{ items: Array<{ id: string }> }>('/v1/projects')).items.map((p) => p.id) : [undefined];
  const out: DoctorAgent[] = [];
  for (const project of projects) {
    const scoped = project === undefined ? client : new ApiClient(conn.url, project, conn.token, conn.profilePath, undefined, timeoutMs);
    const me = project ?? (await scoped.get<{ project: string }>('/v1/whoami')).project;
    const { items } = await scoped.get<{ items: AgentItem[] }>('/v1/agents');
    out.push(...items.map((a) => ({ project: me, handle: a.id, provider: a.provider, settings: a.settings ?? {} })));
  }
  return out;
}

/**
 * The API the CLI would use (the same URL, project and token as every client command): whether
 * it answers and is ready (`GET /v1/ready`), and whether the token is accepted (`GET /v1/whoami`).
 * With `wantAgents`, also the agents the token may list. Every call is bounded by `timeoutMs`.
 */
export async function checkApi(conn: CliConnection, timeoutMs: number, wantAgents: boolean): Promise<ApiFindings> {
  const client = new ApiClient(conn.url, conn.project, conn.token, conn.profilePath, undefined, timeoutMs);
  try {
    await client.get('/v1/ready');
  } catch (err) {
    const token =
      conn.token === undefined
        ? fail('token', 'no token: BATON_TOKEN is not set and no profile holds one', NEW_TOKEN)
        : warn('token', `not checked (from ${tokenSource(conn)}): the API does not answer`, 'fix the api line first');
    return { checks: [apiFailure(err, conn.url), token], agents: null };
  }
  const api = ok('api', `Baton at ${conn.url} answers and is ready`);
  if (conn.token === undefined)
    return { checks: [api, fail('token', 'no token: BATON_TOKEN is not set and no profile holds one', NEW_TOKEN)], agents: null };
  let me: { tokenId: string; admin: boolean; agent: string | null; project: string };
  try {
    me = await client.get('/v1/whoami');
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      return {
        checks: [
          api,
          fail(
            'token',
            `the token from ${tokenSource(conn)} was refused (${err.code})`,
            `it was revoked or belongs to another Baton: ${NEW_TOKEN}`,
          ),
        ],
        agents: null,
      };
    }
    return {
      checks: [
        api,
        fail(
          'token',
          `GET /v1/whoami with the token from ${tokenSource(conn)} failed: ${err instanceof ApiError ? `${err.code}: ${err.message}` : reasonOf(err)}`,
          'check the project (--project, BATON_PROJECT, the profile) and the token',
        ),
      ],
      agents: null,
    };
  }
  const who = me.admin ? 'an admin token' : `agent ${me.agent}'s token`;
  const token = ok('token', `${who} from ${tokenSource(conn)}, project ${me.project}`);
  if (!wantAgents) return { checks: [api, token], agents: null };
  try {
    return { checks: [api, token], agents: await listAgents(conn, client, me.admin, timeoutMs) };
  } catch (err) {
    return {
      checks: [
        api,
        token,
        warn(
          'agents',
          `listing the agents failed: ${err instanceof ApiError ? `${err.code}: ${err.message}` : reasonOf(err)}`,
          'run `baton agent list` to see why',
        ),
      ],
      agents: null,
    };
  }
}
