import { expect } from 'vitest';
import { eventually } from './eventually.ts';
import type { TestBaton } from './test-baton.ts';

/** Waits until the handoff is in `state` (bounded poll of GET /v1/handoffs/:id) and returns its detail. */
export function waitForState(baton: TestBaton, id: string, state: string, timeoutMs = 10_000): Promise<any> {
  return eventually(
    async () => {
      const res = await baton.get(`/v1/handoffs/${id}`);
      expect(res.body.state).toBe(state);
      return res.body;
    },
    { what: `handoff ${id} ${state}`, timeoutMs },
  );
}
