#!/usr/bin/env node
// A webhook agent for Baton in one file, no dependencies (Node 20+). It verifies Baton's
// signature on every request, answers a turn with 202 at once, does the work, then reports the
// result to Baton by a signed callback. Replace `work()` with your agent.
//
//   BATON_WEBHOOK_SECRET=<the agent's secret> PORT=8788 node examples/webhook-agent/server.mjs
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';

const SECRET = process.env.BATON_WEBHOOK_SECRET;
const PORT = Number(process.env.PORT ?? 8788);
const WORK_MS = Number(process.env.WORK_MS ?? 1000);
if (!SECRET || SECRET.length < 16) {
  console.error('set BATON_WEBHOOK_SECRET (at least 16 characters, the same as the agent\'s "secret" setting)');
  process.exit(1);
}

// --- The signature: HMAC-SHA256 of `${timestamp}.${rawBody}`, hex, in `Baton-Signature: v1=<hex>`.
const sign = (timestamp, body) => createHmac('sha256', SECRET).update(`${timestamp}.${body}`).digest('hex');
function verified(headers, body) {
  const timestamp = headers['baton-timestamp'];
  const given = Buffer.from(String(headers['baton-signature'] ?? '').replace(/^v1=/, ''), 'hex');
  const expected = Buffer.from(sign(timestamp, body), 'hex');
  const fresh = Math.abs(Date.now() / 1000 - Number(timestamp)) <= 300;
  return fresh && given.length === expected.length && timingSafeEqual(given, expected);
}
const signed = (body) => {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return { 'content-type': 'application/json', 'baton-timestamp': timestamp, 'baton-signature': `v1=${sign(timestamp, body)}` };
};

/** Your agent goes here: take the turn, return `{ summary, output? }` (throw to fail the turn). */
async function work(turn) {
  await new Promise((r) => setTimeout(r, WORK_MS));
  return { summary: `done: ${turn.title ?? turn.message.slice(0, 80)}`, output: { handoffId: turn.handoffId } };
}

const turns = new Map(); // requestId -> { status, summary?, output?, error? }
let live = null; // the request id of the turn in progress: one turn at a time

async function callBack(turn, report) {
  Object.assign(turns.get(turn.requestId), report);
  if (!turn.callbackUrl) return; // Baton then polls GET /turns/<requestId>
  const body = JSON.stringify({ requestId: turn.requestId, ...report });
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      const res = await fetch(turn.callbackUrl, { method: 'POST', headers: signed(body), body });
      if (res.ok || (res.status >= 400 && res.status < 500)) return;
    } catch {
      // Baton unreachable: try again shortly.
    }
    await new Promise((r) => setTimeout(r, attempt * 500));
  }
}

async function run(turn) {
  await callBack(turn, { status: 'running' });
  let report;
  try {
    report = { status: 'returned', ...(await work(turn)) };
  } catch (err) {
    report = { status: 'failed', error: String(err?.message ?? err) };
  }
  live = null;
  await callBack(turn, report);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    const answer = (status, json, headers = {}) =>
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(json));
    if (!verified(req.headers, raw)) return answer(401, { error: 'bad signature' });
    const url = new URL(req.url, 'http://agent');
    if (req.method === 'GET' && url.pathname.startsWith('/turns/')) {
      const turn = turns.get(decodeURIComponent(url.pathname.slice('/turns/'.length)));
      return turn ? answer(200, turn) : answer(404, { error: 'no such turn' });
    }
    if (req.method !== 'POST' || url.pathname !== '/turns') return answer(404, { error: 'not found' });
    const turn = JSON.parse(raw);
    const statusUrl = `/turns/${encodeURIComponent(turn.requestId)}`;
    // Idempotency-Key is the request id: the same turn twice is one turn.
    if (turns.has(turn.requestId)) return answer(202, { statusUrl });
    if (live) return answer(409, { error: 'busy with another turn' }, { 'retry-after': '5' });
    live = turn.requestId;
    turns.set(turn.requestId, { status: 'accepted' });
    answer(202, { statusUrl });
    void run(turn);
  });
});

server.listen(PORT, '127.0.0.1', () => console.log(`webhook agent listening on http://127.0.0.1:${server.address().port}/turns`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('SIGINT', () => server.close(() => process.exit(0)));
