import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { verifySignature } from '../../libs/adapters/webhook/webhook-signature.ts';

export interface Received {
  readonly deliveryId: string;
  readonly eventId: bigint;
  readonly handoffId: string;
  readonly event: string;
}

/** A receiver on loopback: verifies the signature with the secret it is told, answers what `answer` says. */
export class Receiver {
  readonly got: Received[] = [];
  readonly refusedSignatures: string[] = [];
  secret = '';
  answer: (r: Received) => number | { status: number; headers: Record<string, string> } = () => 200;
  private server: Server | null = null;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const check = verifySignature(
          this.secret,
          { timestamp: req.headers['baton-timestamp'] as string, signature: req.headers['baton-signature'] as string },
          raw,
          Date.now(),
        );
        if (check !== 'ok') {
          this.refusedSignatures.push(check);
          res.writeHead(401).end();
          return;
        }
        const body = JSON.parse(raw.toString('utf8'));
        expect(req.headers['baton-delivery-id']).toBe(body.deliveryId);
        const r: Received = {
          deliveryId: body.deliveryId,
          eventId: BigInt(body.event.id),
          handoffId: body.event.handoffId,
          event: body.event.event,
        };
        const a = this.answer(r);
        const { status, headers } = typeof a === 'number' ? { status: a, headers: {} } : a;
        if (status >= 200 && status < 300) this.got.push(r);
        res.writeHead(status, headers).end(status >= 400 ? 'nope' : 'ok');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
