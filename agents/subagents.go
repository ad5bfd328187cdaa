package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/arborhq/arbor/gitstate"

	"github.com/arborhq/arbor/agents/harness"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// Handle is what rlm() returns in the kernel: the child at admission, never its answer.
type Handle struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Branch   string `json:"branch"`
	Worktree string `json:"worktree"`
	Model    string `json:"model"`
	State    string `json:"state,omitempty"`
	Role     string `json:"role,omitempty"`
}

func handleOf(in Info, role string) Handle {
	return Handle{ID: in.ID, Name: in.Name, Branch: in.Branch, Worktree: in.Worktree, Model: in.Model, State: in.State.String(), Role: role}
}

func hostSpawn(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		Task  string  `json:"task"`
		Name  *string `json:"name"`
		Model *string `json:"model"`
		Spec  *string `json:"spec"`
	}
	if err := decodeStrict("rlm", raw, &p); err != nil {
		return nil, err
	}
	req := CreateRequest{Task: p.Task, Parent: s.meta.ID}
	if p.Name != nil {
		req.Name = *p.Name
	}
	if p.Model != nil {
		req.Model = *p.Model
	}
	if p.Spec != nil && *p.Spec != "" {
		if err := s.applySpec(ctx, &req, *p.Spec); err != nil {
			return nil, fmt.Errorf("rlm: %w", err)
		}
	}
	child, err := s.svc.Create(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("rlm: %w", err)
	}
	return handleOf(s.svc.info(child), "child"), nil
}

// applySpec gives a child the role of a harness subagent spec (the narrowest scope's of that
// id): its instructions after the task, its model unless rlm named one, its step limit.
func (s *Session) applySpec(ctx context.Context, req *CreateRequest, id string) error {
	for _, sc := range harness.Scopes {
		st, err := s.harnessStore(ctx, sc)
		if err != nil {
			return err
		}
		e, err := s.getPinned(ctx, st, sc, harness.Subagent, id)
		if errors.Is(err, harness.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		req.Task += fmt.Sprintf("\n\n[Your role, from the subagent spec %q (%s scope): %s]\n%s", id, sc, e.Title, e.Spec.Instructions)
		if req.Model == "" {
			req.Model = e.Spec.Model
		}
		req.Spec, req.MaxTurnSteps = id, e.Spec.MaxTurnSteps
		return nil
	}
	return fmt.Errorf("spec=%q: no subagent spec of that id in this session's harness; see await harness.subagents.list()", id)
}

// checkSpawn enforces the depth limit and unique sibling names; it names a free name when
// none was given.
func (s *Service) checkSpawn(parent *Session, req *CreateRequest, maxDepth int) error {
	depth := s.info(parent).Depth + 1
	if depth > maxDepth {
		return fmt.Errorf("%w: session %s is at depth %d and the depth limit is %d (maxDepth in arbor.json); do the work here instead of delegating",
			ErrInvalidState, parent.meta.ID[:8], depth-1, maxDepth)
	}
	taken := map[string]bool{}
	for _, c := range parent.childIDs() {
		if cs, err := s.Get(c); err == nil {
			taken[cs.meta.Name] = true
		}
	}
	// Names are reserved under the parent's lock: concurrent rlm() calls from one cell
	// (asyncio.gather) must not both pick the same free name.
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if parent.state == Stopped {
		return fmt.Errorf("%w: session %s is stopped and starts no subagents", ErrInvalidState, shortID(parent.meta.ID))
	}
	if parent.reserved == nil {
		parent.reserved = map[string]bool{}
	}
	for n := range parent.reserved {
		taken[n] = true
	}
	if req.Name != "" {
		if taken[req.Name] {
			return fmt.Errorf("a subagent named %q already exists under %s; choose another name", req.Name, parent.meta.ID[:8])
		}
	} else {
		for i := 1; req.Name == ""; i++ {
			if n := fmt.Sprintf("sub%d", i); !taken[n] {
				req.Name = n
			}
		}
	}
	parent.reserved[req.Name] = true
	return nil
}

// unreserve drops a name reservation once the child is linked, or its creation failed.
func (s *Session) unreserve(name string) {
	s.mu.Lock()
	delete(s.reserved, name)
	s.mu.Unlock()
}

func (s *Session) ownChild(ref string) (*Session, error) {
	for _, c := range s.childIDs() {
		cs, err := s.svc.Get(c)
		if err != nil {
			continue
		}
		if cs.meta.ID == ref || cs.meta.Name == ref || (len(ref) >= 4 && strings.HasPrefix(cs.meta.ID, ref)) {
			return cs, nil
		}
	}
	return nil, fmt.Errorf("%w %q: not a subagent of this session (see await rlm.list_subagents())", ErrUnknownSession, ref)
}

func hostListChildren(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	if err := decodeStrict("rlm.list_subagents", raw, &struct{}{}); err != nil {
		return nil, err
	}
	out := []Handle{}
	for _, c := range s.childIDs() {
		if cs, err := s.svc.Get(c); err == nil {
			out = append(out, handleOf(s.svc.info(cs), "child"))
		}
	}
	return out, nil
}

func hostStopChild(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		ID string `json:"id"`
	}
	if err := decodeStrict("rlm.stop", raw, &p); err != nil {
		return nil, err
	}
	c, err := s.ownChild(p.ID)
	if err != nil {
		return nil, err
	}
	if err := s.svc.Stop(ctx, c.meta.ID); err != nil {
		return nil, err
	}
	return handleOf(s.svc.info(c), "child"), nil
}

// hostMergeChild brings a child's branch into this session's worktree; conflicts come back as
// an error listing the files.
func hostMergeChild(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		ID string `json:"id"`
	}
	if err := decodeStrict("rlm.merge", raw, &p); err != nil {
		return nil, err
	}
	c, err := s.ownChild(p.ID)
	if err != nil {
		return nil, err
	}
	if c.State() == Running {
		return nil, fmt.Errorf("%w: subagent %s is still running; wait for its message, or stop it first", ErrInvalidState, c.meta.Name)
	}
	res, err := s.svc.mergeChild(ctx, s, c, gitstate.Resolutions{})
	if err != nil {
		return nil, fmt.Errorf("rlm.merge: %w", err)
	}
	return map[string]any{"commit": res.Commit, "branch": res.Branch, "files": res.Files}, nil
}

var errNoParent = errors.New("this session has no parent: it is a root session started by the user")
