import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Progress } from '../../services/bench/measure.ts';

describe("the benchmark's progress", () => {
  it('prints one plain line per step when stderr is not a terminal (no control characters)', () => {
    let text = '';
    const p = new Progress(3, true, false, (s) => (text += s));
    p.show('starting');
    p.step('environment ready');
    p.step('send measured');
    p.end();
    expect(text).toBe('[0/3] starting\n[1/3] environment ready\n[2/3] send measured\n');
  });

  it('draws a cli-progress bar on a terminal, redrawn in place and cleared at the end', () => {
    let text = '';
    const tty = Object.assign(
      new Writable({
        write(chunk, _enc, done) {
          text += String(chunk);
          done();
        },
      }),
      { isTTY: true, columns: 100, cursorTo: () => true, clearLine: () => true, moveCursor: () => true },
    );
    let plain = '';
    const p = new Progress(4, true, true, (s) => (plain += s), tty);
    p.show('starting');
    p.step('environment ready');
    p.end();
    expect(plain).toBe('');
    expect(text).toContain('1/4 environment ready');
    expect(text).toMatch(/[\u2588\u2591]/);
  });

  it('prints nothing with --no-progress', () => {
    let text = '';
    const p = new Progress(2, false, false, (s) => (text += s));
    p.step('x');
    expect(text).toBe('');
  });

  it('jumps to a step (watch <id> follows a delivery through its states), never past the ends', () => {
    let text = '';
    const p = new Progress(5, true, false, (s) => (text += s));
    p.set(2, 'SENDING');
    p.set(9, 'RETURNED');
    p.set(-1, 'back');
    expect(text).toBe('[2/5] SENDING\n[5/5] RETURNED\n[0/5] back\n');
  });
});
