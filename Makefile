# The README's commands are these targets: `make demo` and `make test`.
GO ?= go
ARBOR := $(CURDIR)/bin/arbor

.PHONY: all deps build generate demo test test-go test-acp test-e2e test-nvim test-vscode test-vscode-e2e bench bench-editors soak lint clean vsix

all: build

deps:
	@bash scripts/deps.sh

build:
	$(GO) build -o bin/arbor ./cmd/arbor

# The VS Code extension as a .vsix (install: code --install-extension bin/arbor.vsix).
VSIX ?= $(CURDIR)/bin/arbor.vsix
vsix:
	@mkdir -p $(dir $(VSIX))
	cd extensions/vscode && npm ci --no-audit --no-fund --loglevel=error && npm run --silent compile \
		&& npx vsce package --skip-license --out $(VSIX)

demo: deps build
	$(ARBOR) demo

test: deps build test-go test-acp test-e2e

# The tests require what they test (a kernel, bubblewrap), and run without the developer's own
# git configuration, so a missing identity or setting cannot hide behind it.
TEST_ENV := ARBOR_REQUIRE_KERNEL=1 GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

test-go:
	$(GO) vet ./...
	$(TEST_ENV) $(GO) test -race -timeout 15m ./...
	# The every-byte-offset truncation of a 1,000-record log, without -race (which makes it slow).
	$(TEST_ENV) ARBOR_SOAK=1 $(GO) test -count=1 -run TestTruncateEveryOffset ./agents/eventlog/

# `arbor acp` from Node with the official ACP TypeScript SDK as the client (the Go side is
# TestACPFlow in test-go).
test-acp: build
	@bash scripts/deps.sh --editors
	$(TEST_ENV) ARBOR_BIN=$(ARBOR) bash test/acp/run.sh

test-e2e: test-nvim test-vscode test-vscode-e2e

test-nvim: build
	@bash scripts/deps.sh --editors
	$(TEST_ENV) ARBOR_BIN=$(ARBOR) bash extensions/nvim/test/run.sh

test-vscode: build
	@bash scripts/deps.sh --editors
	$(TEST_ENV) ARBOR_BIN=$(ARBOR) bash extensions/vscode/scripts/test.sh

test-vscode-e2e: build
	@bash scripts/deps.sh --editors
	$(TEST_ENV) ARBOR_BIN=$(ARBOR) bash extensions/vscode/scripts/e2e.sh

bench: build
	$(ARBOR) bench startup
	$(ARBOR) bench flood
	$(ARBOR) bench kernel
	$(ARBOR) bench git
	$(ARBOR) bench agents
	$(ARBOR) bench harness
	$(ARBOR) bench eval
	$(ARBOR) bench longrun
	$(ARBOR) bench tokens
	$(ARBOR) bench acp

# The editors' figures, in the real editors: attach → a 5,000-event session's transcript
# rendered (Neovim and VS Code), a cell's print → the editor (p50), and VS Code's extension host
# memory with 200 sessions in the tree. A few minutes each: the test run leaves them out.
bench-editors: build
	@bash scripts/deps.sh --editors
	$(TEST_ENV) ARBOR_E2E_FIGURES=1 ARBOR_NVIM_E2E=views ARBOR_BIN=$(ARBOR) bash extensions/nvim/test/run.sh
	$(TEST_ENV) ARBOR_E2E_FIGURES=1 E2E_FILES=views ARBOR_BIN=$(ARBOR) bash extensions/vscode/scripts/e2e.sh

# Long crash and fork soaks: 1,000 kill -9 cycles of the event log, every byte offset of a
# 1,000-record log, 500 fork/checkpoint/discard operations with random kills, 30 daemon
# kill -9 cycles with sessions running, and a client sending 100,000 requests without reading
# a reply (daemon RSS and a healthy client's p99 against the same run's baseline).
soak: build
	ARBOR_SOAK=1 $(GO) test -count=1 -timeout 60m -run 'TestCrash|TestTruncateEveryOffset' ./agents/eventlog/
	ARBOR_SOAK_GIT=1 $(GO) test -count=1 -timeout 60m -run TestSoakSmall ./gitstate/gitbench/
	ARBOR_SOAK=1 $(GO) test -count=1 -timeout 60m -run TestDaemonKill ./cmd/arbor/
	ARBOR_SOAK=1 $(GO) test -count=1 -timeout 10m -run TestSoakNonReadingClient -v ./cmd/arbor/

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	$(GO) vet ./...

# Regenerate the editors' protocol mirrors from the Go types (the tests fail when they are stale).
generate:
	$(GO) generate ./server

clean:
	rm -rf bin
