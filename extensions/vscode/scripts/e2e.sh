#!/usr/bin/env bash
# End-to-end test in a real VS Code: code-server (VS Code 1.139) driven by headless Chromium
# (playwright-core). A fresh profile with the Arbor extension opens a temp git repository;
# F1 → "Arbor: New Task" → a task → Enter; the session must appear in the Sessions view, idle,
# on its arbor/… branch, and its transcript must open; a session's harness proposals are reviewed
# (diff, reject, accept) in the Harness Proposals view. Everything installed is cached under
# $ARBOR_E2E_CACHE (default ~/.cache/arbor-vscode-e2e); the first run installs for ~3–5 minutes.
# Usage: ARBOR_BIN=/abs/path/to/arbor extensions/vscode/scripts/e2e.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
EXT=$(cd "$HERE/.." && pwd)
fail() { echo "vscode-e2e: FAIL: $*" >&2; exit 1; }
[ -n "${ARBOR_BIN:-}" ] || fail "set ARBOR_BIN to the absolute path of the arbor binary (make build writes bin/arbor)"
[ -x "$ARBOR_BIN" ] || fail "ARBOR_BIN=$ARBOR_BIN is not an executable file"
export ARBOR_BIN=$(cd "$(dirname "$ARBOR_BIN")" && pwd)/$(basename "$ARBOR_BIN")
total=$SECONDS

# 1. The tools (idempotent, cached outside the repository).
s=$SECONDS
bash "$HERE/e2e-install.sh" || fail "installing code-server/chromium/playwright failed (see above)"
echo "vscode-e2e: install check took $((SECONDS-s))s"

# 2. The extension, built with the system Node and packaged as the README says (`make vsix`);
# review.e2e.js installs that .vsix with `code-server --install-extension`.
s=$SECONDS
# Beside the run dir (ARBOR_E2E_RUN, below), so two runs do not share one.
export E2E_VSIX=${ARBOR_E2E_RUN:-${ARBOR_E2E_CACHE:-$HOME/.cache/arbor-vscode-e2e}/run}.vsix
make -s -C "$EXT/../.." vsix VSIX="$E2E_VSIX" >/dev/null || fail "building the extension (make vsix) failed"
echo "vscode-e2e: extension built and packaged in $((SECONDS-s))s"

source "$HERE/e2e-env.sh"
RUN=${ARBOR_E2E_RUN:-$ARBOR_E2E_CACHE/run}   # ARBOR_E2E_RUN: another run dir, so two runs do not share one
FAKE_PID=
cleanup() {
  local rc=$?
  local s=$SECONDS
  # Only the test's own daemon: never one the user runs on the default socket.
  if [ "${ARBOR_SOCKET:-}" = "$RUN/sock/arbor.sock" ] && [ -S "$ARBOR_SOCKET" ]; then
    timeout 15 "$ARBOR_BIN" daemon stop >/dev/null 2>&1 || echo "vscode-e2e: note: \`arbor daemon stop\` failed or hung ($((SECONDS-s))s)" >&2
  fi
  if [ -n "$FAKE_PID" ]; then kill "$FAKE_PID" 2>/dev/null || true; wait "$FAKE_PID" 2>/dev/null || true; fi
  if [ $rc -ne 0 ]; then
    echo "--- logs under $RUN (kept for inspection) ---" >&2
    for f in "$RUN"/code-server.log "$RUN"/fake.err; do [ -f "$f" ] && { echo "== $f" >&2; tail -30 "$f" >&2; }; done
    find "$RUN/data/logs" "$RUN/review/data/logs" -name '*Arbor*' -type f 2>/dev/null | while read -r f; do echo "== $f" >&2; tail -30 "$f" >&2; done
    find "$RUN/state" "$RUN/xdg" "$RUN/review/state" -name '*.log' -type f 2>/dev/null | while read -r f; do echo "== $f" >&2; tail -30 "$f" >&2; done
  fi
  exit $rc
}
trap cleanup EXIT

# 3. A fresh profile, a fresh repository and an isolated daemon on the scripted model.
rm -rf "$RUN"
mkdir -p "$RUN/ext" "$RUN/data/User" "$RUN/home" "$RUN/state" "$RUN/sock" "$RUN/xdg/state" "$RUN/xdg/data" "$RUN/xdg/config"
chmod 700 "$RUN/sock"
# The profile gets the extension as VS Code installs an unpacked one: a folder named
# <publisher>.<name>-<version> in --extensions-dir (here a link to the built extension).
ln -s "$EXT" "$RUN/ext/arbor.arbor-$(node -p "require('$EXT/package.json').version")"
cat > "$RUN/data/User/settings.json" <<JSON
{
  "arbor.path": "$ARBOR_BIN",
  "workbench.startupEditor": "none",
  "security.workspace.trust.enabled": false,
  "chat.disableAIFeatures": true,
  "telemetry.telemetryLevel": "off",
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "workbench.tips.enabled": false,
  "extensions.ignoreRecommendations": true
}
JSON
# The repository the session works in, and the scripted model (shared with the Neovim test).
. "$EXT/../test/fixture.sh"
WS=$RUN/ws
arbor_fixture_repo "$WS"
arbor_fixture_model "$RUN"

# code-server passes its environment to the extension host, which passes it to `arbor lsp`,
# which starts the daemon: so the daemon gets these.
export ARBOR_SOCKET=$RUN/sock/arbor.sock ARBOR_STATE_DIR=$RUN/state
export ARBOR_MODEL_BASE_URL=$URL ARBOR_MODEL=scripted ARBOR_KERNEL_PYTHON=${ARBOR_KERNEL_PYTHON:-/usr/bin/python3}
export XDG_STATE_HOME=$RUN/xdg/state XDG_DATA_HOME=$RUN/xdg/data XDG_CONFIG_HOME=$RUN/xdg/config XDG_RUNTIME_DIR=$RUN/sock
# A free port unless one is given.
E2E_PORT=${E2E_PORT:-$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')}
export E2E_RUN=$RUN E2E_WS=$WS E2E_PORT E2E_SHOT=${E2E_SHOT:-$ARBOR_E2E_CACHE/arbor-e2e.png}
export NODE_PATH=$ARBOR_E2E_CACHE/tools/node_modules

# 4. The test.
s=$SECONDS
set +e
# E2E_FILES: some of the test files (e.g. "views"), by default all of them, one after another.
files=()
for f in ${E2E_FILES:-sessions views review}; do files+=("$EXT/e2e/$f.e2e.js"); done
# E2E_TESTS: only the tests whose names match this regular expression.
node --test --test-concurrency=1 --test-reporter=spec ${E2E_TESTS:+--test-name-pattern="$E2E_TESTS"} "${files[@]}"
rc=$?
set -e
echo "vscode-e2e: UI test took $((SECONDS-s))s; screenshots: $ARBOR_E2E_CACHE/arbor-e2e*.png"
[ $rc -eq 0 ] || fail "the real-VS-Code test failed (see above; screenshot $E2E_SHOT)"
echo "vscode-e2e: PASS ($((SECONDS-total))s in all)"
