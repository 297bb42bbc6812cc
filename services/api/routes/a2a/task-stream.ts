import { StreamResponse, TaskState, type Task } from '@a2a-js/sdk';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { EVENT_STREAM_DEFAULTS } from '../../../../libs/config/component-defaults.ts';
import { BatonError, ERROR_CATALOG } from '../../../../libs/domain/errors.ts';
import type { Viewer } from '../../../../libs/domain/visibility.ts';
import { followEvents, type EventFeed, type Following } from '../../../../libs/handoffs/event-feed.ts';
import type { CoreDeps } from '../../../../libs/handoffs/ports.ts';
import { proveCaller } from '../../plugins/authenticate.ts';
import { NO_STORE } from '../../plugins/no-store.ts';
import { A2A_PROTOCOL } from './protocol.ts';

/** States after which a task stream ends: the final ones, and input-required (A2A's interrupted). */
const STREAM_ENDS: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
]);

export interface TaskStreamInput {
  readonly core: CoreDeps;
  readonly feed: EventFeed;
  readonly project: string;
  readonly viewer: Viewer;
  readonly handoffId: string;
  /** The JSON-RPC request's id, repeated in every event. */
  readonly rpcId: string | number | null;
  /** The task as it is now (read after the feed follows it, so no move falls in between). */
  readonly read: () => Promise<Task>;
}

/** How a stream writes its events: 1.0's StreamResponse by default; the 0.3 shape for a legacy call (legacy-stream.ts). */
export interface StreamFraming {
  readonly version: string;
  readonly frame: (r: StreamResponse, rpcId: string | number | null) => Promise<string>;
}

const V1_FRAMING: StreamFraming = {
  version: A2A_PROTOCOL,
  frame: (r, id) => Promise.resolve(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: StreamResponse.toJSON(r) })}\n\n`),
};

/**
 * SendStreamingMessage and SubscribeToTask: server-sent events, each one JSON-RPC answer. The
 * first is the task as it is, then a status update (and an artifact update when the result
 * arrives) per move of the handoff in the event log (libs/handoffs/event-feed.ts, as `GET
 * /v1/events` follows it), until the task is final or needs input. A client that lost its
 * stream subscribes again (SubscribeToTask) and starts from the task as it then is, so it
 * misses no state. The caller is proven again at each move: a revoked token ends the stream.
 */
export async function streamTask(
  request: FastifyRequest,
  reply: FastifyReply,
  input: TaskStreamInput,
  framing: StreamFraming = V1_FRAMING,
): Promise<void> {
  const raw = reply.raw;
  let ended = false;
  let last: { key: string; artifacts: number } | null = null;
  let following: Following | undefined;
  let markStarted: () => void = () => undefined;
  // Moves wait for the first event (the task), written once the stream's headers are.
  let chain = new Promise<void>((resolve) => (markStarted = resolve));
  let heartbeat: NodeJS.Timeout | undefined;
  const finish = () => {
    if (ended) return;
    ended = true;
    following?.stop();
    clearInterval(heartbeat);
    if (!raw.destroyed && raw.headersSent) raw.end();
  };
  const keyOf = (t: Task) => `${t.status?.state ?? 0}:${t.status?.message?.messageId ?? ''}`;
  /** The events a new read of the task makes: the task itself first, then its new artifacts and status. */
  const eventsOf = (t: Task): StreamResponse[] => {
    if (last === null) return [{ payload: { $case: 'task', value: t } }];
    if (keyOf(t) === last.key) return [];
    const events: StreamResponse[] = t.artifacts.slice(last.artifacts).map((artifact) => ({
      payload: {
        $case: 'artifactUpdate',
        value: { taskId: t.id, contextId: t.contextId, artifact, append: false, lastChunk: true, metadata: undefined },
      },
    }));
    events.push({
      payload: { $case: 'statusUpdate', value: { taskId: t.id, contextId: t.contextId, status: t.status, metadata: t.metadata } },
    });
    return events;
  };
  const emit = async (t: Task) => {
    if (ended) return;
    const events = eventsOf(t);
    last = { key: keyOf(t), artifacts: t.artifacts.length };
    for (const e of events) {
      const text = await framing.frame(e, input.rpcId);
      if (ended) return;
      raw.write(text);
    }
    if (STREAM_ENDS.has(t.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED)) finish();
  };
  const next = () => {
    chain = chain
      .then(async () => {
        if (ended) return;
        try {
          await proveCaller(request, input.core, undefined);
        } catch (err) {
          // Postgres or Redis away: the caller is not proven refused; the next move asks again.
          if (err instanceof BatonError && ERROR_CATALOG[err.code].status < 500) finish();
          return;
        }
        await emit(await input.read());
      })
      .catch((err: unknown) => {
        request.log.warn({ err }, 'A2A task stream ended: the task could not be read');
        finish();
      });
  };
  following = await followEvents(input.core, input.feed, {
    projectSlug: input.project,
    viewer: input.viewer,
    handoffId: input.handoffId,
    after: null,
    deliver: () => next(),
    end: (err) => {
      if (err) request.log.warn({ err }, 'A2A task stream ended: the event log could not be read');
      finish();
    },
  });
  raw.on('close', finish);
  const first = await input.read();
  reply.hijack();
  if (raw.destroyed) {
    finish();
    return;
  }
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': NO_STORE,
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'a2a-version': framing.version,
  });
  heartbeat = setInterval(() => raw.write(': heartbeat\n\n'), EVENT_STREAM_DEFAULTS.heartbeatMs);
  heartbeat.unref();
  try {
    await emit(first);
  } finally {
    markStarted();
  }
}

/**
 * A blocking SendMessage: the task once it is final or input-required (followed on the event
 * feed, read again at each move), or as it is after `timeoutMs`, or when the feed ends.
 */
export async function waitForTask(input: Omit<TaskStreamInput, 'rpcId'>, timeoutMs: number, log: FastifyRequest['log']): Promise<Task> {
  let settle: (t: Promise<Task>) => void = () => undefined;
  const done = new Promise<Task>((resolve) => (settle = (t) => resolve(t)));
  let chain = Promise.resolve();
  let over = false;
  const finish = (t: () => Promise<Task>) => {
    if (over) return;
    over = true;
    settle(t());
  };
  const look = () => {
    chain = chain.then(async () => {
      if (over) return;
      const t = await input.read();
      if (STREAM_ENDS.has(t.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED)) finish(() => Promise.resolve(t));
    });
    chain.catch((err: unknown) => finish(() => Promise.reject(err instanceof Error ? err : new Error(String(err)))));
  };
  const following = await followEvents(input.core, input.feed, {
    projectSlug: input.project,
    viewer: input.viewer,
    handoffId: input.handoffId,
    after: null,
    deliver: look,
    end: (err) => {
      if (err) log.warn({ err }, 'blocking A2A send: the event log could not be read; answering with the task as it is');
      finish(input.read);
    },
  });
  const timer = setTimeout(() => finish(input.read), timeoutMs);
  look();
  try {
    return await done;
  } finally {
    clearTimeout(timer);
    following.stop();
  }
}
