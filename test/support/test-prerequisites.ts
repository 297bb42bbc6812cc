import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * What the suite needs beyond `npm install`, set up by the test command itself so that the
 * README's one command passes on a fresh machine: the pinned real agent CLIs (installed once into
 * a cache outside the repository) and Debian's Chromium for the browser test. Each step prints
 * one progress line when it has work to do and nothing when all is in place. A step that cannot
 * be done says so in one line; the tests that need it then fail (never skip) with their own words.
 */

const INSTALL_SCRIPT = fileURLToPath(new URL('../../scripts/install-agent-clis.sh', import.meta.url));

export interface PrerequisiteIo {
  log(line: string): void;
  env: NodeJS.ProcessEnv;
}

const stderrIo: PrerequisiteIo = { log: (line) => void process.stderr.write(`${line}\n`), env: process.env };

/**
 * Installs the pinned Codex and Claude Code CLIs when they are missing (a no-op, a second or
 * so, when they are in place), and points BATON_AGENT_CLIS_DIR at them for the test processes.
 * @returns the install directory, or null when the install failed (said on one line).
 */
export function ensureAgentClis(io: PrerequisiteIo = stderrIo): string | null {
  // Its stderr is the progress line ("installing ... once") and npm's errors, shown as they come;
  // with --quiet it says nothing when all is in place.
  const run = spawnSync('bash', [INSTALL_SCRIPT, '--quiet'], { env: io.env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = (run.stdout ?? '').trim().split('\n').pop() ?? '';
  if (run.status !== 0 || dir === '') {
    io.log(
      `test set-up: could not install the pinned agent CLIs (scripts/install-agent-clis.sh exited ${run.status}, its words above); the real-CLI tests will fail`,
    );
    return null;
  }
  io.env['BATON_AGENT_CLIS_DIR'] = dir;
  return dir;
}

/** Whether apt-get can install packages here (root, with apt-get on the PATH). */
function canApt(): boolean {
  return process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' }).status === 0;
}

/**
 * Debian's Chromium for test/e2e/live-page.test.ts (Playwright's own browser download needs the
 * network). Installed with apt-get when running as root on Debian; otherwise one line names the
 * command and the browser test fails.
 */
export function ensureChromium(io: PrerequisiteIo = stderrIo): boolean {
  const path = io.env['BATON_CHROMIUM'] ?? '/usr/bin/chromium';
  if (existsSync(path)) return true;
  if (io.env['BATON_CHROMIUM'] !== undefined || !canApt()) {
    io.log(
      `test set-up: no Chromium at ${path}: install it with \`apt-get install -y chromium\` (or point BATON_CHROMIUM at one); the browser test will fail`,
    );
    return false;
  }
  io.log('test set-up: installing Debian chromium for the browser test (apt-get install chromium, once)');
  const env = { ...io.env, DEBIAN_FRONTEND: 'noninteractive' };
  let install = spawnSync('apt-get', ['install', '-y', '-qq', 'chromium'], { env, encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
  if (install.status !== 0) {
    // A fresh machine may have no package lists yet.
    spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'ignore' });
    install = spawnSync('apt-get', ['install', '-y', '-qq', 'chromium'], { env, encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
  }
  if (install.status !== 0 || !existsSync(path)) {
    io.log(
      `test set-up: apt-get install chromium failed: ${(install.stderr ?? '').trim().split('\n').pop() ?? ''}; the browser test will fail`,
    );
    return false;
  }
  return true;
}
