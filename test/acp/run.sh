#!/usr/bin/env bash
# `arbor acp` end to end from Node with the official ACP TypeScript SDK as the client
# (acp.test.js): npm ci (from the npm cache when it has the pinned packages), then node --test.
# Usage: ARBOR_BIN=/abs/path/to/arbor test/acp/run.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
fail() { echo "acp-test: FAIL: $*" >&2; exit 1; }
[ -n "${ARBOR_BIN:-}" ] || fail "set ARBOR_BIN to the absolute path of the arbor binary (make build writes bin/arbor)"
[ -x "$ARBOR_BIN" ] || fail "ARBOR_BIN=$ARBOR_BIN is not an executable file"
export ARBOR_BIN=$(cd "$(dirname "$ARBOR_BIN")" && pwd)/$(basename "$ARBOR_BIN")
command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are needed (apt-get install nodejs npm)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || fail "node $(node -v) is too old: the test needs Node >= 20"

cd "$HERE"
start=$SECONDS
npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null || fail "npm ci failed"
node --test --test-reporter=spec acp.test.js || fail "node --test exited $? (see the failures above)"
echo "acp-test: PASS ($((SECONDS-start))s)"
