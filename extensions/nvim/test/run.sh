#!/usr/bin/env bash
# Headless Neovim test of the Arbor plugin against the real daemon on the scripted model:
# :ArborSessions, :ArborRun, the tree shows the session idle on its arbor/… branch, the transcript,
# the diff, the review of harness proposals and goals (set, pause, resume, replace, show, progress, clear)
# and heartbeats (add, list, delete); then e2e_review.lua (hunk review, merge conflicts). Usage: ARBOR_BIN=/abs/path/to/arbor extensions/nvim/test/run.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PLUGIN=$(cd "$HERE/.." && pwd)
fail() { echo "nvim-test: FAIL: $*" >&2; exit 1; }

[ -n "${ARBOR_BIN:-}" ] || fail "set ARBOR_BIN to the absolute path of the arbor binary (make build writes bin/arbor)"
[ -x "$ARBOR_BIN" ] || fail "ARBOR_BIN=$ARBOR_BIN is not an executable file"
ARBOR_BIN=$(cd "$(dirname "$ARBOR_BIN")" && pwd)/$(basename "$ARBOR_BIN")
if ! command -v nvim >/dev/null; then
  echo "nvim-test: installing neovim (apt)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq neovim >/dev/null) || fail "apt-get install neovim failed"
fi
command -v git >/dev/null || fail "git is not installed"
echo "nvim-test: $(nvim --version | head -1), $ARBOR_BIN"

TMP=$(mktemp -d /tmp/arbor-nvim.XXXXXX)
FAKE_PID=
cleanup() {
  local rc=$?
  # Only the test's own daemon: never one the user runs on the default socket.
  if [ "${ARBOR_SOCKET:-}" = "$TMP/run/arbor.sock" ] && [ -S "$ARBOR_SOCKET" ]; then
    local s=$SECONDS
    timeout 15 "$ARBOR_BIN" daemon stop >/dev/null 2>&1 || echo "nvim-test: note: \`arbor daemon stop\` failed or hung ($((SECONDS-s))s)" >&2
  fi
  if [ -n "$FAKE_PID" ]; then kill "$FAKE_PID" 2>/dev/null || true; wait "$FAKE_PID" 2>/dev/null || true; fi
  if [ $rc -ne 0 ] && [ -d "$TMP/state" ]; then
    echo "--- daemon logs (last 40 lines each) ---" >&2
    find "$TMP/state" "$TMP/xdg" -name '*.log' -type f 2>/dev/null | while read -r f; do echo "== $f" >&2; tail -40 "$f" >&2; done
  fi
  rm -rf "$TMP" 2>/dev/null || { sleep 2; rm -rf "$TMP"; }
  exit $rc
}
trap cleanup EXIT

# Everything the daemon, the kernel and Neovim write stays under $TMP.
mkdir -p "$TMP/xdg/config" "$TMP/xdg/data" "$TMP/xdg/state" "$TMP/xdg/cache" "$TMP/run" "$TMP/state"
chmod 700 "$TMP/run"
export XDG_CONFIG_HOME=$TMP/xdg/config XDG_DATA_HOME=$TMP/xdg/data XDG_STATE_HOME=$TMP/xdg/state \
       XDG_CACHE_HOME=$TMP/xdg/cache XDG_RUNTIME_DIR=$TMP/run
export ARBOR_SOCKET=$TMP/run/arbor.sock ARBOR_STATE_DIR=$TMP/state
export ARBOR_KERNEL_PYTHON=${ARBOR_KERNEL_PYTHON:-/usr/bin/python3}

# The repository the session works in, and the scripted model (shared with the VS Code test).
. "$PLUGIN/../test/fixture.sh"
REPO=$TMP/repo
arbor_fixture_repo "$REPO"
arbor_fixture_model "$TMP"
export ARBOR_MODEL_BASE_URL=$URL ARBOR_MODEL=scripted

cd "$REPO"
# ARBOR_NVIM_E2E=views (or review) runs only e2e_views.lua (or e2e_review.lua) after the unit
# checks; the default runs all three.
E2E=${ARBOR_NVIM_E2E:-all}
if [ "$E2E" = all ]; then
start=$SECONDS
set +e
ARBOR_TEST_OUT=$TMP/result.txt timeout 180 nvim --headless --clean \
  --cmd "set rtp^=$PLUGIN" -c "luafile $HERE/unit.lua" -c "luafile $HERE/unit_review.lua" -c "luafile $HERE/e2e.lua" 2>&1 | awk '{ print "  nvim| " $0; fflush() }'
rc=${PIPESTATUS[0]}
set -e
if [ $rc -eq 0 ] && grep -q '^PASS' "$TMP/result.txt" 2>/dev/null; then
  echo "nvim-test: PASS ($((SECONDS-start))s): $(sed -n 's/^PASS //p' "$TMP/result.txt")"
else
  reason=$(cat "$TMP/result.txt" 2>/dev/null || true)
  [ $rc -eq 124 ] && reason="timed out after 180s; $reason"
  fail "${reason:-nvim exited $rc without a result}"
fi
else
  ARBOR_TEST_OUT=$TMP/result.txt timeout 60 nvim --headless --clean --cmd "set rtp^=$PLUGIN" \
    -c "luafile $HERE/unit.lua" -c "luafile $HERE/unit_review.lua" -c 'qa!' 2>&1 | awk '{ print "  nvim| " $0; fflush() }' || true
  [ ! -s "$TMP/result.txt" ] || fail "$(cat "$TMP/result.txt")"
fi

# The views (transcript, streaming, fork, per-turn diff, harness panel, progress) and their
# figures, in a second Neovim against the same daemon.
if [ "$E2E" = all ] || [ "$E2E" = views ]; then
start=$SECONDS
set +e
ARBOR_TEST_OUT=$TMP/views.txt timeout 420 nvim --headless --clean \
  --cmd "set rtp^=$PLUGIN" -c "luafile $HERE/e2e_views.lua" 2>&1 | awk '{ print "  nvim| " $0; fflush() }'
rc=${PIPESTATUS[0]}
set -e
if [ $rc -eq 0 ] && grep -q '^PASS' "$TMP/views.txt" 2>/dev/null; then
  echo "nvim-test: views PASS ($((SECONDS-start))s): $(sed -n 's/^PASS //p' "$TMP/views.txt")"
else
  reason=$(cat "$TMP/views.txt" 2>/dev/null || true)
  [ $rc -eq 124 ] && reason="timed out after 420s; $reason"
  fail "views: ${reason:-nvim exited $rc without a result}"
fi
fi

# Review by hunk, reject, merge with a conflict resolved, discard's archive, status and progress:
# in a repository of its own (under $TMP), in a third Neovim against the same daemon.
if [ "$E2E" = all ] || [ "$E2E" = review ]; then
start=$SECONDS
set +e
ARBOR_TEST_OUT=$TMP/review.txt ARBOR_TEST_TMP=$TMP timeout 180 nvim --headless --clean \
  --cmd "set rtp^=$PLUGIN" -c "luafile $HERE/e2e_review.lua" 2>&1 | awk '{ print "  nvim review| " $0; fflush() }'
rc=${PIPESTATUS[0]}
set -e
if [ $rc -eq 0 ] && grep -q '^PASS' "$TMP/review.txt" 2>/dev/null; then
  echo "nvim-test: review PASS ($((SECONDS-start))s): $(sed -n 's/^PASS //p' "$TMP/review.txt")"
else
  reason=$(cat "$TMP/review.txt" 2>/dev/null || true)
  [ $rc -eq 124 ] && reason="timed out after 180s; $reason"
  fail "review: ${reason:-nvim exited $rc without a result}"
fi
fi
