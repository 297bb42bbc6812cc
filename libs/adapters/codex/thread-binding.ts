import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** A Codex thread id (a UUID, v7 for threads Codex creates). */
const THREAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isThreadId(target: string | null): target is string {
  return target !== null && THREAD_ID.test(target);
}

/**
 * The thread Baton started for an agent registered without one (its target is not a thread
 * id: e.g. the default, its handle). Kept beside the thread itself, in the Codex home on the
 * pool's host, as `<codexHome>/baton-threads/<agentId>`: every worker of that host finds the
 * same thread, and a worker restart does not start a second one. Written once (link(2) fails
 * if it exists), so two racing first turns agree on one thread.
 */
export class ThreadBindings {
  private fileOf(codexHome: string, agentId: string): string {
    return join(codexHome, 'baton-threads', agentId.replace(/[^A-Za-z0-9_.-]/g, '_'));
  }

  /** The bound thread id, or null when the agent has none yet. */
  async find(codexHome: string, agentId: string): Promise<string | null> {
    try {
      const id = (await readFile(this.fileOf(codexHome, agentId), 'utf8')).trim();
      return isThreadId(id) ? id : null;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  /** Records `threadId` for the agent unless one is recorded already; returns the one that holds. */
  async bind(codexHome: string, agentId: string, threadId: string): Promise<string> {
    const file = this.fileOf(codexHome, agentId);
    await mkdir(join(codexHome, 'baton-threads'), { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
    await writeFile(tmp, `${threadId}\n`, { mode: 0o600 });
    try {
      await link(tmp, file);
      return threadId;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      return (await this.find(codexHome, agentId)) ?? threadId;
    } finally {
      // A temporary file left behind holds only a thread id, and nothing reads `.tmp` files.
      await unlink(tmp).catch(() => undefined);
    }
  }
}
