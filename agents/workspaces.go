package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/workspace"
)

// Workspace is one repository the daemon serves.
type Workspace struct {
	Root        string
	Repo        *gitstate.Repo // the one owner of the repository
	SessionsDir string         // <git-common-dir>/arbor/sessions
	WorktreeDir string         // <git-common-dir>/arbor/worktrees
	slots       *slots         // one per running turn: maxRunning
	reclaimMu   sync.Mutex     // one sweep of the worktree bounds at a time (reclaim.go)
}

// workspaceFor opens (once) the workspace of the repository containing dir.
func (s *Service) workspaceFor(dir string) (*Workspace, error) {
	root, err := workspace.FindRoot(dir)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ws := s.workspaces[root]
	s.mu.Unlock()
	if ws != nil {
		return ws, nil
	}
	repo, err := gitstate.Open(root, s.log)
	if err != nil {
		return nil, err
	}
	if repo.Root() != root {
		// dir is inside a linked worktree: serve the main repository.
		return s.workspaceFor(repo.Root())
	}
	if f := s.opts.WorktreeStep; f != nil {
		repo.OnStep(f)
	}
	repo.FreezeWith(s.freezeWorktree)
	cfg, err := workspace.Load(root, s.opts.Overrides)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(repo.CommonDir(), "arbor")
	ws = &Workspace{Root: root, Repo: repo,
		SessionsDir: filepath.Join(base, "sessions"),
		WorktreeDir: filepath.Join(base, "worktrees"),
		slots:       newSlots(cfg.MaxRunning)}
	for _, d := range []string{ws.SessionsDir, ws.WorktreeDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open workspace %s: %w", root, err)
		}
	}
	s.mu.Lock()
	if prev := s.workspaces[root]; prev != nil {
		s.mu.Unlock()
		return prev, nil
	}
	s.workspaces[root] = ws
	roots := make([]string, 0, len(s.workspaces))
	for r := range s.workspaces {
		roots = append(roots, r)
	}
	s.mu.Unlock()
	if err := s.saveRegistry(roots); err != nil {
		s.log.Warn("save workspace registry", "err", err)
	}
	return ws, nil
}

// Root returns the top level of the repository sessions started from dir work on: the main
// repository, also from one of its linked worktrees. Its arbor.json is the one they load.
func (s *Service) Root(dir string) (string, error) {
	ws, err := s.workspaceFor(dir)
	if err != nil {
		return "", err
	}
	return ws.Root, nil
}

func (ws *Workspace) config(ov workspace.Overrides) (workspace.Config, error) {
	return workspace.Load(ws.Root, ov)
}

func (s *Service) registryPath() string { return filepath.Join(s.opts.StateDir, "workspaces.json") }

func (s *Service) saveRegistry(roots []string) error {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	known, _ := s.loadRegistry()
	set := map[string]bool{}
	for _, r := range append(known, roots...) {
		set[r] = true
	}
	all := make([]string, 0, len(set))
	for r := range set {
		all = append(all, r)
	}
	sort.Strings(all)
	data, _ := json.MarshalIndent(all, "", "  ")
	if err := os.MkdirAll(s.opts.StateDir, 0o700); err != nil {
		return err
	}
	return writeFileAtomic(s.registryPath(), data)
}

// unregister removes root from the registry: a workspace the next start does not recover.
func (s *Service) unregister(root string) error {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	known, err := s.loadRegistry()
	if err != nil {
		return err
	}
	var keep []string
	for _, r := range known {
		if r != root {
			keep = append(keep, r)
		}
	}
	if len(keep) == len(known) {
		return nil
	}
	data, _ := json.MarshalIndent(keep, "", "  ")
	return writeFileAtomic(s.registryPath(), data)
}

func (s *Service) loadRegistry() ([]string, error) {
	data, err := os.ReadFile(s.registryPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var roots []string
	if err := json.Unmarshal(data, &roots); err != nil {
		return nil, fmt.Errorf("workspace registry %s: %w", s.registryPath(), err)
	}
	return roots, nil
}
