package agents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

// sandboxPaths are what the session's sandbox hides and gives back read-only. The view is
// default-deny (package sandbox), so hiding matters where a visible tree holds something: the
// user's main tree, every session's worktree and kernel dir (all under <git-common-dir>/arbor,
// so this session's own are bound back on top), every other workspace the daemon knows (its
// tree and its <git-common-dir>/arbor, wherever they lie) and the daemon's socket dir are
// hidden; the git common dir is readable, so git works in the worktree wherever the repository
// lives, and so are the main-tree paths worktree.link points into.
func (s *Session) sandboxPaths() (hide, readOnly []string) {
	hide = []string{s.ws.Root, filepath.Dir(s.ws.SessionsDir)}
	hide = append(hide, s.svc.workspaceDirs()...)
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

// workspaceDirs are every workspace's tree and <git-common-dir>/arbor the daemon knows: the
// open ones and those in its registry.
func (s *Service) workspaceDirs() []string {
	roots, _ := s.loadRegistry()
	s.mu.Lock()
	for _, ws := range s.workspaces {
		roots = append(roots, ws.Root, filepath.Dir(ws.SessionsDir))
	}
	s.mu.Unlock()
	return roots
}

// gitFile is the worktree's .git file, which the sandbox shows read-only (bound on itself by
// descriptor, opened without following a link): a cell that could rewrite it would steer the
// daemon's git. gitstate first puts it back to what it wrote, should the last code that ran
// there have changed it; a directory that is no linked worktree (a skill check's) has none.
func (s *Session) gitFile(dir string) string {
	if p, err := s.ws.Repo.GitFile(dir); err == nil {
		return p
	}
	return filepath.Join(dir, ".git")
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
	o.SandboxReadOnlyFiles = []string{s.gitFile(s.meta.Worktree)}
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
func (s *Session) setupCommand(ctx context.Context, dir, script string, extra []string) (*exec.Cmd, func(), error) {
	mode, err := s.sandboxFor()
	if err != nil {
		return nil, nil, err
	}
	deny := s.keyEnvs()
	env := append(sandbox.Env(s.cfg.KernelEnv, deny), sandbox.Filter(extra, deny)...)
	argv := []string{"sh", "-c", script}
	var files []*os.File
	if mode != "" {
		// The kernel's tmp and cache, opened as the kernel's sandbox opens them: beneath the
		// daemon's state dir, by descriptor, no symlink followed.
		state := filepath.Join(s.dir, "kernel")
		if err := os.MkdirAll(state, 0o700); err != nil {
			return nil, nil, fmt.Errorf("setup sandbox: %w", err)
		}
		var binds []sandbox.Bind
		for _, d := range []string{"tmp", "cache"} {
			f, err := sandbox.OpenDir(state, d, true)
			if err != nil {
				closeBinds(binds)
				return nil, nil, fmt.Errorf("setup sandbox: %w", err)
			}
			dst := "/tmp"
			if d == "cache" {
				dst = filepath.Join(state, d)
			}
			binds = append(binds, sandbox.Bind{File: f, Dst: dst, Writable: true})
		}
		gf := s.gitFile(dir)
		if f, err := sandbox.OpenFile(gf); err == nil {
			binds = append(binds, sandbox.Bind{File: f, Dst: gf})
		} else if !errors.Is(err, os.ErrNotExist) {
			closeBinds(binds)
			return nil, nil, fmt.Errorf("setup sandbox: %w", err)
		}
		hide, ro := s.sandboxPaths()
		spec := sandbox.Spec{Dir: dir, Hide: hide, ReadOnly: ro, Binds: binds,
			HomeAllow: s.cfg.SandboxHome, Network: s.cfg.AllowNetwork}
		spec.Home, _ = os.UserHomeDir()
		if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
			spec.Hide = append(spec.Hide, rt)
		}
		args, fs, err := spec.Build()
		if err != nil {
			closeBinds(binds)
			return nil, nil, err
		}
		files = fs
		argv = append(append(append([]string{s.svc.sandbox.Path}, args...), "--"), argv...)
		env = append(env, "XDG_CACHE_HOME="+filepath.Join(state, "cache"))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	// The binds' descriptors are the child's from fd 3 on.
	cmd.ExtraFiles = files
	release := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if mode != "" {
		g, err := s.svc.budget(s.cfg.Limits, "c-")
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("setup sandbox: %w", err)
		}
		g.Apply(cmd)
		release = func() {
			for _, f := range files {
				f.Close()
			}
			g.Remove()
		}
	}
	return cmd, release, nil
}

// budget makes the process and memory budget of one sandboxed command (a setup, gate, end
// condition or skill check): the kernels' limits, in a group of its own, so a fork bomb in a
// repository's setup command is bounded like one in a cell. Remove it after the command ends.
func (s *Service) budget(l sandbox.Limits, prefix string) (*sandbox.Group, error) {
	var b [6]byte
	rand.Read(b[:])
	return sandbox.DetectBudget().NewGroup(prefix+hex.EncodeToString(b[:]), l)
}

func closeBinds(bs []sandbox.Bind) {
	for _, b := range bs {
		b.File.Close()
	}
}
