package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/workspace"
)

// RequestError is a request the caller got wrong (an empty task, no directory); the message
// says what to send instead. The server answers it as invalid params, not as an internal
// error.
type RequestError string

func (e RequestError) Error() string { return string(e) }

// CreateRequest starts a session.
type CreateRequest struct {
	Task      string
	Dir       string // a directory inside the repository (ignored for children)
	Parent    string // parent session id for a child
	Name      string
	Model     string // configured model name; "" = the parent's, or the default
	Selection string // editor context appended to the task
	// Spec and MaxTurnSteps come from a harness subagent spec (see hostSpawn).
	Spec         string
	MaxTurnSteps int
	// Profile names the profile of arbor.json the session runs with; "" is the parent's, or
	// none.
	Profile string
	// Open starts a root session without a task: it waits idle for its first message (an ACP
	// client's session/new, whose prompt comes later).
	Open bool
	// Goal, when set, is the session's goal from its first turn on (an autonomous run).
	Goal *GoalSpec
	// RequestKey is the journal key of the client's request (see [Service.RequestApplied]).
	RequestKey string
	// Harness pins harness scopes to commits (see event.SessionCreated.Harness); a child
	// takes its parent's.
	Harness map[string]string
}

// Create starts a session: branch and worktree from the user's HEAD (or the parent's latest
// checkpoint), an event log, a kernel warming up, and a first turn on the task. It returns at
// admission; the session runs on without the caller.
func (s *Service) Create(ctx context.Context, req CreateRequest) (*Session, error) {
	req.Task = strings.TrimSpace(req.Task)
	if req.Open && req.Parent != "" {
		return nil, RequestError("create session: only a root session can be opened without a task; a child needs one")
	}
	if req.Task == "" && !req.Open {
		return nil, RequestError("create session: the task is empty; say what the session should do")
	}
	if req.Goal != nil {
		if err := req.Goal.Validate(); err != nil {
			return nil, err
		}
	}
	var parent *Session
	ws, base := (*Workspace)(nil), ""
	if req.Parent != "" {
		p, err := s.Get(req.Parent)
		if err != nil {
			return nil, err
		}
		parent, ws = p, p.ws
		p.mu.Lock()
		base = p.head
		p.mu.Unlock()
		if req.Model == "" {
			_, req.Model = p.modelClient()
		}
	} else {
		if req.Dir == "" {
			return nil, RequestError("create session: no directory given; run it inside a git repository")
		}
		w, err := s.workspaceFor(req.Dir)
		if err != nil {
			return nil, err
		}
		ws = w
		_, head, err := ws.Repo.Head(ctx)
		if err != nil {
			return nil, err
		}
		base = head
	}
	cfg, err := ws.config(s.overridesFor(ws.Root))
	if err != nil {
		return nil, err
	}
	// The repository's commands, interpreter, sandbox and key routing run only once the user
	// trusted them: refused here, before anything of the session exists.
	if err := cfg.Trust.Check(); err != nil {
		return nil, err
	}
	if err := ws.checkBudget(ctx, cfg.Worktrees, base); err != nil {
		return nil, err
	}
	var parentMeta *Meta
	if parent != nil {
		parentMeta = &parent.meta
	}
	var prof Meta
	if cfg, err = withProfile(cfg, req.Profile, parentMeta, &prof); err != nil {
		return nil, err
	}
	if parent == nil {
		req.Goal = profileGoal(cfg.ActiveProfile, req.Task, req.Goal)
	}
	if g := req.Goal; g != nil && g.By == "autonomous" && g.Until == "" {
		msg := "create session: an autonomous run needs an end condition: --until \"make test\" (a command that passes when the task is done)"
		if req.Profile != "" {
			msg += fmt.Sprintf(", or a profile that sets \"until\" (profile %s does not)", req.Profile)
		}
		return nil, RequestError(msg)
	}
	if parent != nil {
		if err := s.checkSpawn(parent, &req, cfg.MaxDepth); err != nil {
			return nil, err
		}
		defer parent.unreserve(req.Name) // linked as a child below, or failed
	}
	name, mc, err := cfg.ResolveModel(req.Model)
	if err != nil {
		return nil, err
	}
	client, err := newModelClient(name, mc, s.log)
	if err != nil {
		return nil, err
	}
	id := newID()
	slug := req.Task
	if slug == "" {
		slug = cmp.Or(req.Name, "session")
	}
	meta := Meta{
		ID: id, Task: req.Task, Name: req.Name, Model: name, BaseCommit: base, Open: req.Task == "",
		Branch:    "arbor/" + gitstate.Slug(slug) + "-" + id[:8],
		Worktree:  filepath.Join(ws.WorktreeDir, id),
		Workspace: ws.Root, Created: time.Now().UTC(), Selection: req.Selection,
		Spec: req.Spec, MaxTurnSteps: req.MaxTurnSteps,
		Profile: prof.Profile, ProfileSettings: prof.ProfileSettings, RequestKey: req.RequestKey,
	}
	if parent != nil {
		meta.Parent = parent.meta.ID
		meta.Harness = parent.meta.Harness
	} else {
		meta.Harness = req.Harness
	}
	// The files are written while the first model call goes out (see worktreeGate); a
	// child's once it has a run slot, so children queued behind maxRunning hold no files.
	// (A user's own session is written at once: its worktree is where they look next.)
	var hold *gitstate.Hold
	if parent != nil {
		hold = gitstate.NewHold()
	}
	pending, err := s.startWorktree(ctx, ws.Repo, gitstate.WorktreeSpec{Name: id, Branch: meta.Branch, Base: base, Dir: meta.Worktree, Hold: hold}, !cfg.Worktree.Empty())
	if err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	sess, err := s.open(ws, meta, cfg, client)
	if err != nil {
		return nil, err
	}
	if _, err := sess.append(ctx, meta); err != nil {
		// Not recorded, so not a session: unregister it; the next daemon start's reconcile
		// cleans up the worktree (keeping any work on a branch).
		s.mu.Lock()
		delete(s.sessions, id)
		s.mu.Unlock()
		sess.log.Close()
		os.RemoveAll(sess.dir) // holds only the log that never got its first record
		return nil, err
	}
	var warm func()
	if parent == nil {
		// A user waits on a root session's first result; children start their kernel at
		// their first tool call, so a wide tree does not boot a kernel per leaf.
		warm = sess.warmKernel
	}
	sess.gateWorktree(pending, hold, warm)
	if hold == nil {
		if cfg.Worktrees.Bounded() {
			sess.reclaimLater() // one more worktree: an inactive session's may go
		}
		if pending != nil {
			s.worktreeStep(id, "writing")
		}
	} // else both at beginWorktree
	sess.setState(ctx, Admitted, "")
	if parent != nil {
		parent.mu.Lock()
		parent.children = append(parent.children, id)
		parentStopped := parent.state == Stopped
		parent.mu.Unlock()
		parent.append(ctx, event.SubagentSpawned{ID: id, Name: meta.Name, Branch: meta.Branch, Task: meta.Task})
		parent.announce()
		if parentStopped {
			// The parent was stopped while this child was being made (a Stop walking the tree
			// may already have passed it): the child stops too, before it runs anything.
			s.Stop(ctx, id)
			return nil, fmt.Errorf("%w: the parent session %s was stopped", ErrInvalidState, shortID(parent.meta.ID))
		}
	}
	task := req.Task
	if req.Selection != "" {
		task += "\n\nSelected in the editor:\n" + req.Selection
	}
	if err := sess.setupWorktree(ctx); err != nil {
		// Reported on the session, and to the model, which can often work around it.
		task += "\n\n" + setupFailedText(err.Error())
	}
	if req.Goal != nil {
		// Before the task is queued, so the first turn is already the goal's.
		if _, err := sess.setGoal(ctx, *req.Goal); err != nil {
			return nil, err
		}
	}
	if meta.Open {
		// Nothing to do until the first message: idle, as a session between turns is.
		sess.setState(ctx, Idle, "")
		sess.scheduleInactive()
		return sess, nil
	}
	if _, err := sess.enqueue(ctx, "task", task, "follow_up"); err != nil {
		return nil, err
	}
	return sess, nil
}

// open registers a session object over its (new or existing) log.
func (s *Service) open(ws *Workspace, meta Meta, cfg workspace.Config, client *model.Client) (*Session, error) {
	dir := filepath.Join(ws.SessionsDir, meta.ID)
	if meta.MaxTurnSteps > 0 && meta.MaxTurnSteps < cfg.MaxTurnSteps {
		cfg.MaxTurnSteps = meta.MaxTurnSteps // its spec's limit, kept across restarts by the log
	}
	sess := &Session{svc: s, ws: ws, meta: meta, cfg: cfg, dir: dir, client: client, model: meta.Model, head: meta.BaseCommit}
	lg, err := eventlog.Open(filepath.Join(dir, "events.jsonl"), eventlog.Options{Logger: s.log, OnDurable: sess.publish})
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", meta.ID, err)
	}
	sess.log = lg
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		lg.Close()
		return nil, errors.New("the daemon is shutting down")
	}
	s.sessions[meta.ID] = sess
	return sess, nil
}

func newModelClient(name string, mc workspace.Model, logger *slog.Logger) (*model.Client, error) {
	cfg := model.Config{
		Name: name, BaseURL: mc.BaseURL, Model: mc.Model, APIKeyEnv: mc.APIKeyEnv,
		ContextWindow: mc.ContextWindow, ToolMode: mc.ToolMode,
		InputPrice: mc.InputPrice, OutputPrice: mc.OutputPrice,
		Backoff: mc.Retry.Backoff, Timeout: mc.Retry.Timeout,
	}
	if n := mc.Retry.MaxRetries; n != nil {
		cfg.MaxRetries = *n
		if *n == 0 {
			cfg.MaxRetries = -1 // the client's spelling of none
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return model.New(cfg, logger)
}

func setupFailedText(why string) string {
	return "[arbor] preparing your worktree failed; some untracked files or setup steps may be missing: " + why
}

func setupFailedNote(why string) model.Message {
	return model.Message{Role: "user", Content: setupFailedText(why)}
}

// setupWorktree copies or links the untracked paths arbor.json lists into the new worktree and
// runs its setup command; a failure is recorded on the session.
func (s *Session) setupWorktree(ctx context.Context) error {
	w := s.cfg.Worktree
	if w.Empty() {
		return nil
	}
	// The command's budget and descriptors are released once SetupWorktree has waited for it.
	var release func()
	setup := func(ctx context.Context, dir, script string, extra []string) (*exec.Cmd, error) {
		cmd, rel, err := s.setupCommand(ctx, dir, script, extra)
		release = rel
		return cmd, err
	}
	err := s.ws.Repo.SetupWorktree(ctx, s.meta.Worktree, gitstate.Setup{
		Copy: w.Copy, Link: w.Link, Command: w.Command, Timeout: w.CommandTimeout,
		Env: []string{"ARBOR_SESSION=" + s.meta.ID}, Exec: setup,
	})
	if release != nil {
		release()
	}
	if err != nil {
		s.append(ctx, event.WorktreeSetup{OK: false, Error: err.Error()})
		return err
	}
	s.append(ctx, event.WorktreeSetup{OK: true, Copied: w.Copy, Linked: w.Link, Command: w.Command})
	return nil
}
