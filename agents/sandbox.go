package agents

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/arborhq/arbor/kernel"
	"github.com/arborhq/arbor/sandbox"
	"github.com/arborhq/arbor/workspace"
)

// Sandbox reports what the daemon's probe found: whether bubblewrap can confine kernels here,
// and why not.
func (s *Service) Sandbox() sandbox.Status { return s.sandbox }

// sandboxFor resolves the configured mode against the probe: "bwrap" or "" (unsandboxed). A
// required sandbox that cannot work is an error saying what to do.
func (s *Session) sandboxFor() (string, error) {
	st := s.svc.sandbox
	switch s.cfg.Sandbox {
	case workspace.SandboxOff:
		return "", nil
	case workspace.SandboxBwrap:
		if !st.Available {
			return "", fmt.Errorf("the configuration requires the sandbox (\"sandbox\": \"bwrap\") but it cannot work here: %s; "+
				"fix that, or set \"sandbox\": \"auto\" to run unsandboxed where it cannot", st.Reason)
		}
		return "bwrap", nil
	default: // auto
		if !st.Available {
			return "", nil
		}
		return "bwrap", nil
	}
}

// sandboxPaths are what the session's sandbox hides and gives back read-only: the user's main
// tree, every session's worktree and kernel dir (all under <git-common-dir>/arbor, so this
// session's own are bound back on top), and the daemon's socket dir are hidden; the git common
// dir is readable, so git works in the worktree wherever the repository lives, and so are the
// main-tree paths worktree.link points into.
func (s *Session) sandboxPaths() (hide, readOnly []string) {
	hide = []string{s.ws.Root, filepath.Dir(s.ws.SessionsDir)}
	// An eval task's session must not see the repository measured, the suite (its hidden
	// checks) or the results.
	hide = append(hide, s.svc.evalHide(s.ws.Root)...)
	if d := s.svc.opts.SocketDir; d != "" {
		hide = append(hide, d)
	}
	// The artifacts too: a large output is handed to the kernel by its path (_arbor_out).
	readOnly = []string{s.ws.Repo.CommonDir(), s.artifactsDir()}
	for _, l := range s.cfg.Worktree.Link {
		readOnly = append(readOnly, filepath.Join(s.ws.Root, l))
	}
	return hide, readOnly
}

// kernelOptions are the sandbox and environment settings of the session's kernel.
func (s *Session) kernelOptions(o *kernel.Options) error {
	mode, err := s.sandboxFor()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.artifactsDir(), 0o700); err != nil {
		return fmt.Errorf("artifacts dir: %w", err)
	}
	o.Sandbox, o.AllowNetwork = mode, s.cfg.AllowNetwork
	o.SandboxHome = s.cfg.SandboxHome
	o.SandboxHide, o.SandboxReadOnly = s.sandboxPaths()
	o.EnvPass, o.EnvDeny = s.cfg.KernelEnv, s.keyEnvs()
	return nil
}

// keyEnvs are the variables holding model API keys: those of every configured model, and the
// daemon's own override.
func (s *Session) keyEnvs() []string {
	deny := s.cfg.KeyEnvs()
	if k := s.svc.opts.Overrides.APIKeyEnv; k != "" {
		deny = append(deny, k)
	}
	return deny
}

// setupCommand builds the worktree setup command: in the session's sandbox (the same one as
// its kernel, without the kernel's state) when the kernel would get one, and always with the
// kernel's environment rules, so a repository's command sees no key either.
func (s *Session) setupCommand(ctx context.Context, dir, script string, extra []string) (*exec.Cmd, error) {
	mode, err := s.sandboxFor()
	if err != nil {
		return nil, err
	}
	deny := s.keyEnvs()
	env := append(sandbox.Env(s.cfg.KernelEnv, deny), sandbox.Filter(extra, deny)...)
	argv := []string{"sh", "-c", script}
	if mode != "" {
		state := filepath.Join(s.dir, "kernel")
		tmp, cache := filepath.Join(state, "tmp"), filepath.Join(state, "cache")
		for _, d := range []string{tmp, cache} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, fmt.Errorf("setup sandbox: %w", err)
			}
		}
		hide, ro := s.sandboxPaths()
		spec := sandbox.Spec{Dir: dir, Writable: []string{cache}, Hide: hide, ReadOnly: ro, Tmp: tmp,
			HomeAllow: s.cfg.SandboxHome, Network: s.cfg.AllowNetwork}
		spec.Home, _ = os.UserHomeDir()
		if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
			spec.Hide = append(spec.Hide, rt)
		}
		args, err := spec.Args()
		if err != nil {
			return nil, err
		}
		argv = append(append(append([]string{s.svc.sandbox.Path}, args...), "--"), argv...)
		env = append(env, "XDG_CACHE_HOME="+cache)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	return cmd, nil
}
