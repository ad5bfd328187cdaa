# The README's commands are these targets: `make demo` and `make test`.
GO ?= go
ARBOR := $(CURDIR)/bin/arbor

.PHONY: all deps build demo test test-go test-e2e test-nvim test-vscode test-vscode-e2e bench soak lint clean

all: build

deps:
	@bash scripts/deps.sh

build:
	$(GO) build -o bin/arbor ./cmd/arbor

demo: deps build
	$(ARBOR) demo

test: deps build test-go test-e2e

test-go:
	$(GO) vet ./...
	$(GO) test -race -timeout 15m ./...
	# The every-byte-offset truncation of a 1,000-record log, without -race (which makes it slow).
	ARBOR_SOAK=1 $(GO) test -count=1 -run TestTruncateEveryOffset ./agents/eventlog/

test-e2e: test-nvim test-vscode test-vscode-e2e

test-nvim: build
	@bash scripts/deps.sh --editors
	ARBOR_BIN=$(ARBOR) bash extensions/nvim/test/run.sh

test-vscode: build
	@bash scripts/deps.sh --editors
	ARBOR_BIN=$(ARBOR) bash extensions/vscode/scripts/test.sh

test-vscode-e2e: build
	@bash scripts/deps.sh --editors
	ARBOR_BIN=$(ARBOR) bash extensions/vscode/scripts/e2e.sh

bench: build
	$(ARBOR) bench startup
	$(ARBOR) bench kernel
	$(ARBOR) bench git
	$(ARBOR) bench agents

# Long crash and fork soaks: 1,000 kill -9 cycles of the event log, every byte offset of a
# 1,000-record log, 500 fork/checkpoint/discard operations with random kills, and 30 daemon
# kill -9 cycles with sessions running.
soak: build
	ARBOR_SOAK=1 $(GO) test -count=1 -timeout 60m -run 'TestCrash|TestTruncateEveryOffset' ./agents/eventlog/
	ARBOR_SOAK_GIT=1 $(GO) test -count=1 -timeout 60m -run TestSoakSmall ./gitstate/gitbench/
	ARBOR_SOAK=1 $(GO) test -count=1 -timeout 60m -run TestDaemonKill ./cmd/arbor/

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	$(GO) vet ./...

clean:
	rm -rf bin
