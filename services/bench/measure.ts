import { readdir, readFile, readlink } from 'node:fs/promises';

/** Percentile (nearest rank) of an unsorted list; 0 for an empty one. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

/** Peak resident set size of a process, in MiB (VmHWM), or null when it is gone. */
export async function peakRssMiB(pid: number): Promise<number | null> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
    return Number.isFinite(kb) ? round(kb / 1024) : null;
  } catch {
    return null;
  }
}

/** Resident set size of a process right now, in MiB (VmRSS), or null when it is gone. */
export async function rssMiB(pid: number): Promise<number | null> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
    return Number.isFinite(kb) ? round(kb / 1024) : null;
  } catch {
    return null;
  }
}

/**
 * How many TCP connections a process holds to `port` (its sockets in /proc/<pid>/fd matched
 * against /proc/net/tcp{,6}): counts every connection, named or not, blocking or not.
 */
export async function connectionsTo(pid: number, port: number): Promise<number> {
  const inodes = new Set<string>();
  try {
    for (const fd of await readdir(`/proc/${pid}/fd`)) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const m = /^socket:\[(\d+)\]$/.exec(link);
      if (m) inodes.add(m[1]!);
    }
  } catch {
    return 0;
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  let count = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      const remote = cols[2];
      const state = cols[3];
      const inode = cols[9];
      if (remote?.endsWith(`:${hexPort}`) && state === '01' && inode && inodes.has(inode)) count++;
    }
  }
  return count;
}

export { Progress } from '../../libs/terminal/progress-bar.ts';

export const TICK_MS = 1000 / 100; // USER_HZ is 100 on Linux

export interface ProcStat {
  ppid: number;
  /** utime + stime, ms. */
  ownMs: number;
  /** cutime + cstime, ms: children that exited and were reaped (Postgres backends that closed). */
  reapedMs: number;
}

export async function procStat(pid: number): Promise<ProcStat | null> {
  try {
    const text = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm)": state is [0], ppid [1], utime [11], stime [12], cutime [13], cstime [14].
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), ownMs: (Number(f[11]) + Number(f[12])) * TICK_MS, reapedMs: (Number(f[13]) + Number(f[14])) * TICK_MS };
  } catch {
    return null;
  }
}

/** CPU time of a process, ms, or null when it is gone. */
export async function cpuOf(pid: number | null | undefined): Promise<number | null> {
  if (!pid || pid < 0) return null;
  return (await procStat(pid))?.ownMs ?? null;
}
