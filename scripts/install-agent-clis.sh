#!/usr/bin/env bash
# Installs the real agent CLIs the tests drive (Codex app-server, Claude Code headless) at the
# versions the recipes verified, into a cache OUTSIDE the repository so a user's `npm install`
# stays small. Idempotent: an install already in place is reused without a download.
#
#   scripts/install-agent-clis.sh            # install if missing, print the bin directory
#   BATON_AGENT_CLIS_DIR=/some/dir scripts/install-agent-clis.sh
#   scripts/install-agent-clis.sh --quiet    # say nothing when they are already in place
#
# The test command runs it (test/support/test-prerequisites.ts), so `npm test` installs them
# on a fresh machine by itself.
#
# Tests find the binaries through BATON_AGENT_CLIS_DIR, or this script's default location
# (test/support/agent-clis.ts), and FAIL (never skip) when they are missing.
set -euo pipefail

CODEX_VERSION=0.171.0
CLAUDE_VERSION=2.1.197

dir="${BATON_AGENT_CLIS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/agent-clis/codex-${CODEX_VERSION}_claude-code-${CLAUDE_VERSION}}"
bin="$dir/node_modules/.bin"

installed() {
  [ -x "$bin/codex" ] && [ -x "$bin/claude" ] \
    && "$bin/codex" --version 2>/dev/null | grep -q "$CODEX_VERSION" \
    && "$bin/claude" --version 2>/dev/null | grep -q "$CLAUDE_VERSION"
}

quiet=false
[ "${1:-}" = "--quiet" ] && quiet=true

if installed; then
  $quiet || echo "agent CLIs already installed in $dir" >&2
else
  echo "installing @openai/codex@$CODEX_VERSION and @anthropic-ai/claude-code@$CLAUDE_VERSION into $dir (about 800 MB, once)" >&2
  mkdir -p "$dir"
  # A private package.json keeps npm from walking up into whatever project is above the cache.
  [ -f "$dir/package.json" ] || printf '{ "name": "baton-agent-clis", "private": true }\n' > "$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
    "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2
  if ! installed; then
    echo "install-agent-clis: the installed binaries do not report the pinned versions ($bin)" >&2
    exit 1
  fi
fi

# stdout: the directory only, so `.ci/run` can capture it.
echo "$dir"
