import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { CODEX_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const OP_CONTINUATION = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
/** The daemon announces 16 MiB as its largest unfragmented message; a reassembled one may not grow past 4x that. */
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * A WebSocket (RFC 6455) client on the Unix control socket of the Codex app-server daemon
 * (`codex app-server --listen unix://`, started by `codex app-server daemon start`). The daemon
 * speaks WebSocket there, one JSON-RPC message per text frame; `codex app-server proxy` only
 * copies bytes to that socket, so talking to the socket directly needs the same framing and
 * spares a child process. Only what the daemon uses is implemented: text messages (fragmented
 * or not), ping/pong and close. Emits 'message' (string) per message and 'close' once.
 */
export class ControlSocket extends EventEmitter {
  private buffer: Buffer = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  private fragmentBytes = 0;
  private closed = false;

  private constructor(private readonly socket: net.Socket) {
    super();
  }

  /**
   * Connects and upgrades. @throws the connect error (ENOENT / ECONNREFUSED: no daemon on that
   * path), an Error when the upgrade is refused, or the signal's reason.
   */
  static connect(path: string, signal: AbortSignal): Promise<ControlSocket> {
    return new Promise<ControlSocket>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const socket = net.connect(path);
      const key = randomBytes(16).toString('base64');
      let head = Buffer.alloc(0);
      const cleanup = () => {
        signal.removeEventListener('abort', onAbort);
        socket.off('data', onData);
        socket.off('error', fail);
        socket.off('close', onEarlyClose);
      };
      function fail(err: unknown): void {
        cleanup();
        socket.destroy();
        reject(err);
      }
      const onAbort = () => fail(signal.reason);
      const onEarlyClose = () => fail(new Error(`the control socket ${path} closed during the WebSocket handshake`));
      const onData = (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > 16_384) fail(new Error('the control socket sent an oversized handshake'));
          return;
        }
        const lines = head.subarray(0, end).toString('latin1').split('\r\n');
        if (!/^HTTP\/1\.1 101\b/.test(lines[0] ?? ''))
          return fail(new Error(`the control socket refused the WebSocket upgrade: ${lines[0] ?? ''}`));
        const accept = lines
          .find((l) => /^sec-websocket-accept:/i.test(l))
          ?.replace(/^[^:]*:/, '')
          .trim();
        if (
          accept !==
          createHash('sha1')
            .update(key + WS_GUID)
            .digest('base64')
        )
          return fail(new Error('the control socket answered the upgrade with a wrong accept key'));
        cleanup();
        const ws = new ControlSocket(socket);
        ws.attach(head.subarray(end + 4));
        resolve(ws);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      socket.on('data', onData);
      socket.once('error', fail);
      socket.once('close', onEarlyClose);
      socket.once('connect', () => {
        socket.write(
          `GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        );
      });
    });
  }

  get open(): boolean {
    return !this.closed;
  }

  /** Sends one text message; false when the socket is already closed. */
  send(text: string): boolean {
    if (this.closed) return false;
    this.writeFrame(OP_TEXT, Buffer.from(text, 'utf8'));
    return true;
  }

  /** Sends a close frame and waits for the socket to close (at most CODEX_ADAPTER_DEFAULTS.socketCloseMs). */
  async close(): Promise<void> {
    if (this.closed) return;
    const gone = new Promise<void>((resolve) => this.once('close', () => resolve()));
    const code = Buffer.alloc(2);
    code.writeUInt16BE(1000);
    this.writeFrame(OP_CLOSE, code);
    this.socket.end();
    const timer = setTimeout(() => this.socket.destroy(), CODEX_ADAPTER_DEFAULTS.socketCloseMs);
    timer.unref();
    await gone;
    clearTimeout(timer);
  }

  private attach(rest: Buffer): void {
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    // A reset or broken pipe ends the connection like a close: 'close' follows and says so.
    this.socket.on('error', () => undefined);
    this.socket.once('close', () => {
      this.closed = true;
      this.emit('close');
    });
    if (rest.length > 0) this.onData(rest);
  }

  private writeFrame(opcode: number, payload: Buffer): void {
    // Client frames must be masked (RFC 6455 5.3).
    const mask = randomBytes(4);
    const len = payload.length;
    let head: Buffer;
    if (len < 126) {
      head = Buffer.from([0x80 | opcode, 0x80 | len]);
    } else if (len < 65_536) {
      head = Buffer.alloc(4);
      head[0] = 0x80 | opcode;
      head[1] = 0x80 | 126;
      head.writeUInt16BE(len, 2);
    } else {
      head = Buffer.alloc(10);
      head[0] = 0x80 | opcode;
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(len), 2);
    }
    const body = Buffer.allocUnsafe(len);
    for (let i = 0; i < len; i++) body[i] = payload[i]! ^ mask[i & 3]!;
    this.socket.write(Buffer.concat([head, mask, body]));
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const b = this.buffer;
      if (b.length < 2) return;
      const fin = (b[0]! & 0x80) !== 0;
      const opcode = b[0]! & 0x0f;
      const masked = (b[1]! & 0x80) !== 0;
      let len = b[1]! & 0x7f;
      let offset = 2;
      if (len === 126) {
        if (b.length < 4) return;
        len = b.readUInt16BE(2);
        offset = 4;
      } else if (len === 127) {
        if (b.length < 10) return;
        const big = b.readBigUInt64BE(2);
        if (big > BigInt(MAX_MESSAGE_BYTES)) return this.protocolError();
        len = Number(big);
        offset = 10;
      }
      const maskKey = masked ? b.subarray(offset, offset + 4) : null;
      if (masked) offset += 4;
      if (b.length < offset + len) return;
      let payload = b.subarray(offset, offset + len);
      this.buffer = b.subarray(offset + len);
      if (maskKey) {
        payload = Buffer.from(payload);
        for (let i = 0; i < payload.length; i++) payload[i] = payload[i]! ^ maskKey[i & 3]!;
      }
      if (opcode === OP_PING) this.writeFrame(0xa, payload);
      else if (opcode === OP_CLOSE) {
        if (!this.closed) this.writeFrame(OP_CLOSE, payload.subarray(0, 2));
        this.socket.end();
      } else if (opcode === OP_TEXT || opcode === OP_BINARY || opcode === OP_CONTINUATION) {
        this.fragments.push(payload);
        this.fragmentBytes += payload.length;
        if (this.fragmentBytes > MAX_MESSAGE_BYTES) return this.protocolError();
        if (fin) {
          const message = Buffer.concat(this.fragments).toString('utf8');
          this.fragments = [];
          this.fragmentBytes = 0;
          this.emit('message', message);
        }
      }
      // Pongs and unknown control frames carry nothing Baton needs.
    }
  }

  private protocolError(): void {
    this.buffer = Buffer.alloc(0);
    this.socket.destroy();
  }
}
