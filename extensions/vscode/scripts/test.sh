#!/usr/bin/env bash
# Builds the VS Code extension (npm ci, tsc) and runs its Node tests: unit tests (the golden event
# logs), the check of the generated protocol mirrors and the editors' use of them, and the
# protocol layer against the real `arbor lsp`.
# Usage: ARBOR_BIN=/abs/path/to/arbor extensions/vscode/scripts/test.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "vscode-test: FAIL: $*" >&2; exit 1; }
[ -n "${ARBOR_BIN:-}" ] || fail "set ARBOR_BIN to the absolute path of the arbor binary (make build writes bin/arbor)"
[ -x "$ARBOR_BIN" ] || fail "ARBOR_BIN=$ARBOR_BIN is not an executable file"
export ARBOR_BIN=$(cd "$(dirname "$ARBOR_BIN")" && pwd)/$(basename "$ARBOR_BIN")
command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are needed (apt-get install nodejs npm)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || fail "node $(node -v) is too old: the tests need Node >= 20"

cd "$HERE"
start=$SECONDS
npm ci --no-audit --no-fund --loglevel=error >/dev/null || fail "npm ci failed"
npm run --silent compile || fail "tsc failed"
echo "vscode-test: built in $((SECONDS-start))s"
set +e
node --test --test-reporter=spec test/*.test.js ../test/*.test.js 2>&1 | tee /tmp/arbor-vscode-test.$$.log
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^ℹ (pass|fail) ' /tmp/arbor-vscode-test.$$.log | awk '{print $3}' | paste -sd' ')
rm -f /tmp/arbor-vscode-test.$$.log
read -r pass failed <<<"$summary"
if [ $rc -eq 0 ]; then
  echo "vscode-test: PASS ($((SECONDS-start))s)"
  echo "vscode-test: ${pass:-0} passed, ${failed:-0} failed"
else
  echo "vscode-test: ${pass:-0} passed, ${failed:-0} failed"
  fail "node --test exited $rc (see the failures above)"
fi
