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

soak: build
	ARBOR_SOAK=1 $(GO) test -run Soak -timeout 60m ./...

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	$(GO) vet ./...

clean:
	rm -rf bin
