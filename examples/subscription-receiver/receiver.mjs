#!/usr/bin/env node
// A receiver for Baton's signed event subscriptions in one file, no dependencies (Node 20+).
// It verifies the signature of every POST, answers 2xx once it has the event, skips a delivery id
// it has already seen (Baton delivers at least once), and prints one line per event.
//
//   baton subscription add http://127.0.0.1:8790/events      # prints the secret once
//   BATON_SUBSCRIPTION_SECRET=<that secret> PORT=8790 node examples/subscription-receiver/receiver.mjs
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';

const SECRET = process.env.BATON_SUBSCRIPTION_SECRET;
const PORT = Number(process.env.PORT ?? 8790);
if (!SECRET) {
  console.error('set BATON_SUBSCRIPTION_SECRET to the secret `baton subscription add` printed');
  process.exit(1);
}

// --- The signature: HMAC-SHA256 of `${timestamp}.${rawBody}`, hex, in `Baton-Signature: v1=<hex>`.
function verified(headers, body) {
  const timestamp = String(headers['baton-timestamp'] ?? '');
  const given = Buffer.from(String(headers['baton-signature'] ?? '').replace(/^v1=/, ''), 'hex');
  const expected = createHmac('sha256', SECRET).update(`${timestamp}.`).update(body).digest();
  const fresh = Math.abs(Date.now() / 1000 - Number(timestamp)) <= 300;
  return fresh && given.length === expected.length && timingSafeEqual(given, expected);
}

const seen = new Set(); // delivery ids already handled (keep them durably in a real receiver)

http
  .createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method !== 'POST' || !verified(req.headers, body)) return res.writeHead(401).end();
      const { deliveryId, event } = JSON.parse(body.toString('utf8'));
      if (!seen.has(deliveryId)) {
        seen.add(deliveryId);
        const work = event.workToState ? ` work ${event.workToState}` : '';
        console.log(
          `${event.id} ${event.handoffId} ${event.event}: ${event.fromState ?? '-'} -> ${event.toState}${work} (${event.handoff.title ?? ''})`,
        );
      }
      res.writeHead(204).end();
    });
  })
  .listen(PORT, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${PORT}/events`));
