import { copyFileSync, createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';

/**
 * Every line each Baton process of a chaos run printed, one file per slot (all the starts of
 * that slot, one after the other), written as it comes: a process's own output buffer keeps
 * only its last half megabyte, and what went wrong in a failed run is mostly early on.
 */
export class ProcessLogs {
  private readonly files = new Map<string, { path: string; stream: WriteStream }>();

  constructor(private readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  /** Appends the child's standard output and error to the slot's file, after a line naming the start. */
  follow(slot: string, start: number, child: ChildProcess): void {
    let file = this.files.get(slot);
    if (!file) {
      const path = join(this.dir, `${slot}.log`);
      file = { path, stream: createWriteStream(path, { flags: 'a' }) };
      file.stream.on('error', () => undefined);
      this.files.set(slot, file);
    }
    const out = file.stream;
    out.write(`===== ${slot} start ${start} (pid ${child.pid}) =====\n`);
    child.stdout?.on('data', (chunk: Buffer) => out.write(chunk));
    child.stderr?.on('data', (chunk: Buffer) => out.write(chunk));
    child.once('exit', (code, signal) => out.write(`===== ${slot} start ${start} (pid ${child.pid}) exited: ${code ?? signal} =====\n`));
  }

  /** Copies every file to `dir` once what was written so far is on disk; returns the copies. */
  async copyTo(dir: string): Promise<string[]> {
    const copies: string[] = [];
    for (const [slot, { path, stream }] of this.files) {
      // A write's callback runs once it, and so everything before it, is in the file.
      await new Promise<void>((resolve) => stream.write(`===== ${slot}: copied at ${new Date().toISOString()} =====\n`, () => resolve()));
      const to = join(dir, `${slot}.log`);
      copyFileSync(path, to);
      copies.push(to);
    }
    return copies;
  }

  close(): void {
    for (const { stream } of this.files.values()) stream.end();
  }
}
