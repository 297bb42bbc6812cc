import { afterEach, describe, expect, it } from 'vitest';
import { DemoAgentHost, findWriteViolations, type DemoTurnInput } from '../../libs/adapters/demo/demo-agent-host.ts';
import { DemoHostClient } from '../../libs/adapters/demo/demo-host-client.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';

/**
 * The demo host's write log is what the fault and crash tests read to prove that Baton never
 * wrote to a session during another of its turns and never wrote a request id twice. These
 * tests make exactly those mistakes on purpose and check that the log shows them: a check
 * that cannot fail proves nothing.
 */

const turn = (requestId: string, handoffId = `h-${requestId}`): DemoTurnInput => ({
  requestId,
  handoffId,
  from: 'boss',
  title: null,
  message: requestId,
});

let host: DemoAgentHost;
afterEach(() => host?.close());

describe('demo host write log', () => {
  it('records a write that arrives while another turn of the session is live, although the session answered busy', async () => {
    host = new DemoAgentHost();
    expect(await host.receiveTurn('s1', turn('r1'), { behavior: 'hang' })).toMatchObject({ status: 'accepted' });
    expect(await host.receiveTurn('s1', turn('r2'), {})).toEqual({ status: 'busy' });

    // The busy write never became a turn, so the history alone looks clean...
    expect(host.history('s1').map((t) => t.requestId)).toEqual(['r1']);
    // ...but the write log shows it, with the turn it ran into.
    expect(host.writes('s1').map((w) => [w.requestId, w.answer, w.liveTurn])).toEqual([
      ['r1', 'accepted', null],
      ['r2', 'busy', 'r1'],
    ]);
    expect(findWriteViolations(host.writes())).toEqual([
      { kind: 'overlap', write: expect.objectContaining({ session: 's1', requestId: 'r2', liveTurn: 'r1' }) },
    ]);
  });

  it('records a request id written twice', async () => {
    host = new DemoAgentHost();
    await host.receiveTurn('s1', turn('r1'), { thinkMs: 0 });
    await host.receiveTurn('s1', turn('r1'), { thinkMs: 0 });
    expect(host.history('s1')).toHaveLength(1);
    const violations = findWriteViolations(host.writes());
    expect(violations).toEqual([
      {
        kind: 'repeated_request_id',
        requestId: 'r1',
        writes: [expect.objectContaining({ answer: 'accepted' }), expect.objectContaining({ answer: 'repeated' })],
      },
    ]);
  });

  it('finds nothing wrong with writes one after another, a busy session Baton did not cause, or a busy probe', async () => {
    host = new DemoAgentHost();
    host.script('s1', ['hang', 'busy', 'refuse']);
    await host.receiveTurn('s1', turn('r1'), {});
    expect(await host.isBusy('s1')).toBe(true); // asking is not writing
    expect(host.finish('s1', 'r1')).toBe(true);
    expect(await host.receiveTurn('s1', turn('r2'), {})).toEqual({ status: 'busy' }); // scripted: a turn Baton did not start
    expect(await host.receiveTurn('s1', turn('r3'), {})).toMatchObject({ status: 'refused' });
    await host.receiveTurn('s1', turn('r4'), { thinkMs: 0 });
    await host.receiveTurn('s2', turn('r5'), { behavior: 'hang' }); // another session is independent
    expect(host.writes().map((w) => w.answer)).toEqual(['accepted', 'busy', 'refused', 'accepted', 'accepted']);
    expect(findWriteViolations(host.writes())).toEqual([]);
  });

  it('serves the log over HTTP, overlapping writes included, for tests whose workers are other processes', async () => {
    host = new DemoAgentHost();
    const served = await serveDemoHost(host);
    const client = new DemoHostClient(served.url);
    try {
      await client.receiveTurn('s1', turn('r1'), { behavior: 'hang' });
      await client.receiveTurn('s1', turn('r2'), {});
      const all = await client.writes();
      expect(all.map((w) => [w.session, w.requestId, w.answer, w.liveTurn])).toEqual([
        ['s1', 'r1', 'accepted', null],
        ['s1', 'r2', 'busy', 'r1'],
      ]);
      expect(await client.writes('s1')).toEqual(all);
      expect(findWriteViolations(all).map((v) => v.kind)).toEqual(['overlap']);
    } finally {
      client.close();
      await served.close();
    }
  });
});
