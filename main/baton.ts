// The `baton` command (bin/baton.mjs loads this file's build, dist/main/baton.js): the CLI of
// services/cli with the launchers of the processes that live in other services (launchers.ts).
import { PROCESS_IO, runCli } from '../services/cli/program.ts';
import { LAUNCHERS } from './launchers.ts';

// `baton board | head`: the reader went away. Not an error of the command: stop quietly. A
// long-running command (serve, demo) stops as on Ctrl+C, so it still cleans up; the others exit 0.
let readerGone = false;
const onOutputError = (err: NodeJS.ErrnoException) => {
  // Once gone, later writes fail too (ERR_STREAM_DESTROYED): nothing more to say.
  if (readerGone) return;
  if (err.code !== 'EPIPE') throw err;
  readerGone = true;
  if (process.listenerCount('SIGTERM') > 0) process.emit('SIGTERM', 'SIGTERM');
  else process.exit(0);
};
process.stdout.on('error', onOutputError);
process.stderr.on('error', onOutputError);

process.exitCode = await runCli(process.argv.slice(2), process.env, PROCESS_IO, LAUNCHERS);
