import { TaskState, taskStateToJSON, type ListTasksRequest, type ListTasksResponse, type Task } from '@a2a-js/sdk';
import { A2A_TASK_STATES, statePairsOf, protocolStateName, type A2aTaskState } from '../../../../libs/domain/a2a-task-states.ts';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { isUuid } from '../../../../libs/domain/ids.ts';
import { LIMITS } from '../../../../libs/domain/limits.ts';
import { listHandoffs } from '../../../../libs/handoffs/query-handoffs.ts';
import { taskOf } from '../../../../libs/a2a/present-task.ts';
import type { A2aCall } from './a2a-call.ts';

/** A2A's own bound on a ListTasks page (1 to 100, 50 when not given), within Baton's page limits. */
const PAGE_MAX = Math.min(100, LIMITS.pageSizeMax);
const PAGE_DEFAULT = Math.min(LIMITS.pageSizeDefault, PAGE_MAX);

function a2aStateOf(status: TaskState): A2aTaskState | undefined {
  const name = taskStateToJSON(status);
  return A2A_TASK_STATES.find((s) => protocolStateName(s) === name);
}

/**
 * ListTasks (protocol 1.0): the tasks of this agent the caller may see (handoffs to it, as
 * `GET /v1/handoffs?recipient=` lists them, through the same use case), newest first, paged
 * by listHandoffs' stable cursor. Filters: `contextId` (a session, or a handoff without one),
 * `status` (the (delivery, work) state pairs the one state table maps to it, applied in the query
 * like `statusTimestampAfter`, so every page but the last is full), `historyLength`,
 * `includeArtifacts` (false by default, as A2A says). `totalSize` counts every matching task
 * the caller may see, on all pages.
 * @throws BatonError validation_failed, invalid_cursor
 */
export async function listTasksOf(call: A2aCall, params: ListTasksRequest): Promise<ListTasksResponse> {
  const pageSize = params.pageSize ?? PAGE_DEFAULT;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > PAGE_MAX)
    throw new BatonError('validation_failed', `params/pageSize must be 1 to ${PAGE_MAX}`);
  if (params.historyLength !== undefined && (!Number.isInteger(params.historyLength) || params.historyLength < 0))
    throw new BatonError('validation_failed', 'params/historyLength must be 0 or more');
  const after = params.statusTimestampAfter ? Date.parse(params.statusTimestampAfter) : undefined;
  if (after !== undefined && Number.isNaN(after))
    throw new BatonError('validation_failed', 'params/statusTimestampAfter must be an ISO 8601 time');
  const state = params.status === TaskState.TASK_STATE_UNSPECIFIED ? undefined : a2aStateOf(params.status);
  if (params.status !== TaskState.TASK_STATE_UNSPECIFIED && state === undefined)
    throw new BatonError('validation_failed', `params/status ${taskStateToJSON(params.status)} is not a state Baton's tasks take`);
  const empty: ListTasksResponse = { tasks: [], nextPageToken: '', pageSize, totalSize: 0 };
  // A context that is not a uuid names no session and no handoff: nothing matches.
  if (params.contextId !== '' && !isUuid(params.contextId)) return empty;
  const page = await listHandoffs(call.core, {
    project: call.project,
    recipient: call.agent.handle,
    ...(state ? { statePairs: statePairsOf(state) } : {}),
    ...(after !== undefined ? { updatedAfter: new Date(after) } : {}),
    ...(params.contextId !== '' ? { contextId: params.contextId } : {}),
    countTotal: true,
    limit: pageSize,
    ...(params.pageToken !== '' ? { cursor: params.pageToken } : {}),
    viewer: call.viewer,
  });
  const tasks: Task[] = page.items.map((h) => {
    const t = taskOf(h);
    return {
      ...t,
      artifacts: params.includeArtifacts === true ? t.artifacts : [],
      history: params.historyLength === undefined ? t.history : params.historyLength === 0 ? [] : t.history.slice(-params.historyLength),
    };
  });
  return { tasks, nextPageToken: page.nextCursor ?? '', pageSize, totalSize: page.total ?? tasks.length };
}
