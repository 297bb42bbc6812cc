import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startBusyProcesses } from '../../services/chaos/busy-processes.ts';
import { eventually } from '../support/eventually.ts';

/**
 * `baton chaos --starved` spins busy processes beside Baton; on a shared two-core machine they
 * must never outlive the run: stop() ends them, and so do their own bound and the end of the
 * process that started them (a chaos run SIGKILLed, or exiting at a second Ctrl+C).
 */

/** Running and not a zombie: a busy process still spinning. */
function spinning(pid: number): boolean {
  if (!existsSync(`/proc/${pid}/stat`)) return false;
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

describe('busy processes for a starved chaos run', () => {
  it('spins one per CPU (times the factor) and stop() ends every one', async () => {
    const busy = startBusyProcesses(2, 60_000);
    try {
      expect(busy.count).toBe(2 * busy.cpus);
      expect(busy.pids.filter(spinning)).toHaveLength(busy.count);
    } finally {
      await busy.stop();
    }
    expect(busy.pids.filter(spinning)).toEqual([]);
  });

  it('each ends by itself once its lifetime is over', async () => {
    const lifetimeMs = 1_000;
    const busy = startBusyProcesses(1, lifetimeMs);
    try {
      // The lifetime, and room for a starved scheduler to let each one look at the clock.
      await eventually(() => busy.pids.filter(spinning).length === 0, {
        timeoutMs: lifetimeMs + 15_000,
        intervalMs: 100,
        what: 'busy processes past their lifetime gone',
      });
    } finally {
      await busy.stop();
    }
  });

  it('each ends by itself when the process that started it is SIGKILLed', async () => {
    const module = fileURLToPath(new URL('../../services/chaos/busy-processes.ts', import.meta.url));
    const parent = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `const { startBusyProcesses } = await import(${JSON.stringify(module)}); const b = startBusyProcesses(1, 600000); console.log(JSON.stringify(b.pids)); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const pids = await new Promise<number[]>((resolve, reject) => {
      parent.stdout.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()) as number[]));
      parent.once('exit', (code) => reject(new Error(`the parent exited (${code}) before starting them`)));
    });
    expect(pids.filter(spinning)).toHaveLength(pids.length);
    parent.kill('SIGKILL');
    await eventually(() => pids.filter(spinning).length === 0, {
      timeoutMs: 15_000,
      intervalMs: 100,
      what: 'busy processes of a killed parent gone',
    });
  }, 30_000);
});
