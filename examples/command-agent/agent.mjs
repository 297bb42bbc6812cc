#!/usr/bin/env node
// A command agent for Baton in one file (Node 20+, no dependencies). Baton starts it once per
// turn, by argv (never through a shell), in the agent's working directory, with the turn on
// standard input and the turn's ids in the environment. What it prints on standard output is
// the turn's summary; the exit code says how the turn went:
//   0   returned (stdout is the summary)
//   75  busy, nothing done: Baton tries again later, no attempt spent
//   77  refused: Baton retries once, then the handoff is FAILED
//   any other code: failed (stderr is the error); Baton resends at most twice
// Replace `work()` with your agent.
import { appendFileSync, existsSync, readFileSync } from 'node:fs';

const turn = {
  handoffId: process.env.BATON_HANDOFF_ID,
  requestId: process.env.BATON_REQUEST_ID,
  attempt: Number(process.env.BATON_ATTEMPT),
  from: process.env.BATON_FROM,
  title: process.env.BATON_TITLE,
  // The message, the context packet (what other agents wrote is fenced as data), and a last
  // line `baton-request-id: <id>`.
  text: readFileSync(0, 'utf8'),
};

// Busy, nothing done: a file in the working directory says "not now".
if (existsSync('.agent-busy')) process.exit(75);

async function work(t) {
  // Stand-in for real work: keep a journal of the turns this agent took.
  appendFileSync('journal.md', `## ${t.title || '(no title)'} from ${t.from} (attempt ${t.attempt})\n\n${t.text}\n`);
  return `noted "${t.title || t.text.split('\n')[0]}" in journal.md`;
}

try {
  process.stdout.write(await work(turn));
} catch (err) {
  process.stderr.write(String(err?.stack ?? err));
  process.exit(1);
}
