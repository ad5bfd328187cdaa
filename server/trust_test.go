package server

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// TestTrustOverProtocol: a create in an untrusted repository fails with CodeUntrusted and a
// TrustState as data (what an editor needs to ask); trust.grant of another hash is refused;
// trust.grant of the hash shown trusts it (from a subdirectory too), after which the create
// passes the gate (and fails further on, on the model nobody configured); trust.revoke asks
// again.
func TestTrustOverProtocol(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	d := startTestDaemon(t, "")
	repo := filepath.Join(t.TempDir(), "repo")
	gitInit(t, repo, map[string]string{"main.py": "print('hi')\n"})
	os.MkdirAll(filepath.Join(repo, "sub"), 0o755)
	os.WriteFile(filepath.Join(repo, "arbor.json"), []byte(`{"worktree":{"command":"make"}}`), 0o644)
	c := dialClient(t, d.sock)
	ctx := t.Context()

	rpcErr := func(err error) (*jsonrpc2.Error, TrustState) {
		t.Helper()
		var e *jsonrpc2.Error
		if !errors.As(err, &e) {
			t.Fatalf("want a JSON-RPC error, got %v", err)
		}
		var st TrustState
		if e.Data != nil {
			if err := json.Unmarshal(*e.Data, &st); err != nil {
				t.Fatalf("error data is not a TrustState: %v", err)
			}
		}
		return e, st
	}
	_, err := SessionCreate.Call(ctx, c, SessionCreateParams{Task: "t", Dir: repo})
	e, st := rpcErr(err)
	if e.Code != CodeUntrusted || st.Repo != repo || st.File != filepath.Join(repo, "arbor.json") || st.Trusted ||
		len(st.Settings) != 1 || st.Settings[0].Name != "worktree.command" || st.Settings[0].Value != `"make"` ||
		st.Hash == "" || st.Command != "arbor trust "+repo || !strings.Contains(e.Message, "arbor trust "+repo) {
		t.Fatalf("create: code %d data %+v message %q", e.Code, st, e.Message)
	}

	got, err := TrustGet.Call(ctx, c, TrustParams{Dir: filepath.Join(repo, "sub")})
	if err != nil || got.Hash != st.Hash || got.Trusted {
		t.Fatalf("trust.get = %+v, %v", got, err)
	}
	_, err = TrustGrant.Call(ctx, c, TrustGrantParams{Dir: repo, Hash: "sha256:something-else"})
	if e, st2 := rpcErr(err); e.Code != CodeUntrusted || st2.Hash != st.Hash || !strings.Contains(e.Message, "changed since") {
		t.Fatalf("grant of another hash: %d %q %+v", e.Code, e.Message, st2)
	}
	granted, err := TrustGrant.Call(ctx, c, TrustGrantParams{Dir: filepath.Join(repo, "sub"), Hash: st.Hash})
	if err != nil || !granted.Trusted {
		t.Fatalf("trust.grant = %+v, %v", granted, err)
	}
	_, err = SessionCreate.Call(ctx, c, SessionCreateParams{Task: "t", Dir: repo})
	if e, _ := rpcErr(err); e.Code != CodeModelUnavailable {
		t.Fatalf("create after trust: %d %s, want CodeModelUnavailable (past the trust gate)", e.Code, e.Message)
	}
	revoked, err := TrustRevoke.Call(ctx, c, TrustParams{Dir: repo})
	if err != nil || revoked.Trusted {
		t.Fatalf("trust.revoke = %+v, %v", revoked, err)
	}
	_, err = SessionCreate.Call(ctx, c, SessionCreateParams{Task: "t", Dir: repo})
	if e, _ := rpcErr(err); e.Code != CodeUntrusted {
		t.Fatalf("create after revoke: %d %s", e.Code, e.Message)
	}
	_, err = TrustGet.Call(ctx, c, TrustParams{Dir: t.TempDir()})
	if e, _ := rpcErr(err); e.Code != CodeNotRepository {
		t.Fatalf("trust.get outside a repository: %d %s", e.Code, e.Message)
	}
}
