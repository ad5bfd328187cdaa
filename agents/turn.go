package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/kernel"
	"github.com/arborhq/arbor/workspace"
)

// enqueue records a message for the session and makes sure a turn will deliver it. It returns
// "delivered" when a running turn will take it before its next model call, else "queued".
func (s *Session) enqueue(ctx context.Context, from, text, mode string) (string, error) {
	return s.enqueueMsg(ctx, event.MessageQueued{From: from, Text: text, Mode: mode})
}

// enqueueMsg is enqueue of a whole message_queued record (a heartbeat's names its run).
func (s *Session) enqueueMsg(ctx context.Context, q event.MessageQueued) (string, error) {
	status, _, err := s.enqueueSeq(ctx, q)
	return status, err
}

// enqueueSeq is enqueueMsg also returning the seq of the message_queued record.
func (s *Session) enqueueSeq(ctx context.Context, q event.MessageQueued) (string, uint64, error) {
	from, text, mode := q.From, q.Text, q.Mode
	switch mode {
	case "", "auto":
		mode = "auto"
	case "steer", "follow_up":
	default:
		return "", 0, fmt.Errorf("message mode %q: want auto, steer or follow_up", mode)
	}
	q.Mode = mode
	s.mu.Lock()
	if s.state == Stopped {
		s.mu.Unlock()
		return "", 0, fmt.Errorf("%w: session %s is stopped; fork it to continue its work", ErrInvalidState, s.meta.ID)
	}
	s.mu.Unlock()
	rec, err := s.append(ctx, q)
	if err != nil {
		return "", 0, err
	}
	s.mu.Lock()
	if s.state == Stopped { // stopped while the message was being recorded
		s.mu.Unlock()
		return "", 0, fmt.Errorf("%w: session %s is stopped; fork it to continue its work", ErrInvalidState, s.meta.ID)
	}
	s.pending = append(s.pending, pendingMsg{Seq: rec.Seq, From: from, Text: text, Mode: mode})
	s.noteTitle(from, text)
	status := "queued"
	if s.holder == turnHolder && mode != "follow_up" {
		status = "delivered"
	}
	start := s.holder == free // else the holder runs a turn for it when it lets go
	if start {
		s.holder = turnHolder
	}
	s.mu.Unlock()
	if start && !s.svc.spawn(s.runTurns) {
		s.mu.Lock()
		s.holder = free // the service is closing: the message waits in the log for recovery
		s.mu.Unlock()
	}
	return status, rec.Seq, nil
}

// runTurns is the session's one turn goroutine: it runs turns while messages are pending.
// It holds the session's reservation (turnHolder) until it settles with nothing pending.
func (s *Session) runTurns() {
	for {
		s.mu.Lock()
		if s.state == Stopped || s.svc.ctx.Err() != nil {
			s.holder = free
			s.mu.Unlock()
			return
		}
		if len(s.pending) == 0 {
			s.mu.Unlock()
			if s.settle(s.svc.ctx, Idle, "") {
				continue
			}
			s.svc.heartbeatsFree(s)
			s.scheduleInactive()
			s.goalRecheck()
			s.goalChildSettled()
			return
		}
		s.turn++
		turn := s.turn
		ctx, cancel := context.WithCancel(s.svc.ctx)
		s.cancelTurn = cancel
		s.mu.Unlock()

		if err := s.ws.slots.acquire(ctx, s); err != nil {
			cancel()
			continue // stopped or shutting down: the loop head sees it
		}
		s.beginWorktree(false) // written while the turn's first model call goes out
		s.mu.Lock()
		s.toldParent = false
		s.mu.Unlock()
		if !s.startTurn(ctx, turn) {
			s.ws.slots.release(s)
			cancel()
			continue // stopped meanwhile: the loop head sees it
		}
		s.goalTurnStart()
		s.loadHarness(ctx)
		err := s.runTurnIsolated(ctx, turn)
		s.ws.slots.release(s)
		s.holdWorktree() // not begun yet, and no cell needed it: no files until the next turn
		cancel()
		s.checkpoint(ctx, turn)
		s.maybeRefine("everyTurns", turn)
		why := ""
		if errors.Is(err, context.Canceled) && s.svc.ctx.Err() == nil {
			why = s.takeInterrupt()
		}
		if why == "" {
			// A turn a goal's budget cut short tells no one: the goal above has ended, and a
			// notice would start another, ungoverned turn.
			s.notifyParent(err)
		}
		switch {
		case err == nil:
			s.goalAfterTurn(s.svc.ctx, nil)
		case s.State() == Stopped:
			s.mu.Lock()
			s.holder = free // Discard waits for this before removing the worktree
			s.mu.Unlock()
			return
		case errors.Is(err, context.Canceled) && s.svc.ctx.Err() != nil:
			s.append(s.svc.ctx, event.Interrupted{Turn: turn, Reason: "daemon stopping"})
			return
		case why != "":
			// Cut short on purpose (a goal's budget): recorded as such; the session stays.
			s.append(s.svc.ctx, event.Interrupted{Turn: turn, Reason: why})
			s.mu.Lock()
			s.conv = closeDanglingToolCalls(s.conv, "[arbor] this cell was interrupted: "+why)
			s.mu.Unlock()
		default:
			why := failureReason(err)
			limit := ""
			if errors.As(err, new(stepLimitError)) {
				limit = "steps"
			}
			s.append(ctx, event.TurnFailed{Turn: turn, Error: why, Limit: limit})
			// A tool call the turn did not answer would make the next request invalid.
			s.mu.Lock()
			s.conv = closeDanglingToolCalls(s.conv, turnFailedNote(why))
			s.mu.Unlock()
			s.goalAfterTurn(s.svc.ctx, err)
			if s.settle(ctx, Failed, why) {
				continue // a message arrived: try again
			}
			s.svc.heartbeatsFree(s)
			s.scheduleInactive()
			s.goalRecheck()
			s.goalChildSettled()
			return
		}
	}
}

// stepLimitError is a turn that reached its limit of model calls.
type stepLimitError int

func (e stepLimitError) Error() string {
	return fmt.Sprintf("the turn reached its limit of %d model calls (maxTurnSteps in arbor.json)", int(e))
}

// turnFailedNote answers the tool calls a failed turn left open; replay writes the same.
func turnFailedNote(why string) string {
	return "[arbor] this cell's turn failed before its result was recorded: " + why
}

// failureReason is what a failed turn tells the user: the error, and for a full disk what to do.
func failureReason(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return err.Error() + "; free space on that disk, then send the session a message to continue"
	}
	return err.Error()
}

// settle records st while this goroutine still owns the session, then gives the session up —
// unless a message arrived meanwhile, and then it reports true and the loop runs another turn.
// Recording before letting go means a new turn's "running" can never be overwritten by this
// turn's late "idle".
func (s *Session) settle(ctx context.Context, st State, reason string) bool {
	s.setState(ctx, st, reason)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 && s.state != Stopped && s.svc.ctx.Err() == nil {
		return true
	}
	s.holder = free
	return false
}

// runTurnIsolated runs one turn as an isolation boundary: a panic in it is logged with its
// stack and fails the turn (a turn_failed event says so), and the daemon goes on.
func (s *Session) runTurnIsolated(ctx context.Context, turn int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.svc.log.Error("panic in turn", "session", s.meta.ID, "turn", turn, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error in the arbor daemon (%v); it was logged — please report it, then send a message to retry", p)
		}
	}()
	return s.runTurn(ctx, turn)
}

// runTurn calls the model and runs its tool calls until it answers without one.
func (s *Session) runTurn(ctx context.Context, turn int) error {
	defer s.awaitCheckpoint()
	steps := s.cfg.MaxTurnSteps
	for step := 0; step < steps; step++ {
		// Messages are taken first, even when the turn then fails: a failed turn retries only
		// for a message that arrives after it, never in a loop on the same one.
		if err := s.deliver(ctx, step == 0); err != nil {
			return err
		}
		if hook := s.svc.opts.turnHook; hook != nil && step == 0 {
			hook(s, turn)
		}
		client, modelName := s.modelClient()
		if client == nil {
			// Recovered without a usable model (its key variable unset, or the model removed
			// from arbor.json): resolve it again now, or fail the turn saying why.
			name, mc, err := s.cfg.ResolveModel(modelName)
			if err != nil {
				return fmt.Errorf("model %q: %w", modelName, err)
			}
			if client, err = newModelClient(name, mc, s.svc.log); err != nil {
				return fmt.Errorf("model %q: %w", modelName, err)
			}
			s.mu.Lock()
			if s.client == nil && s.model == modelName {
				s.client = client
			}
			s.mu.Unlock()
		}
		if err := s.maybeCompact(ctx, client, false); err != nil {
			return err
		}
		reply, err := s.complete(ctx, client)
		s.awaitCheckpoint() // the last cell's checkpoint is recorded before the reply
		if errors.Is(err, model.ErrContextOverflow) {
			// The estimate was off for this model: compact now and try once more.
			if cerr := s.maybeCompact(ctx, client, true); cerr != nil {
				return fmt.Errorf("model %s: %w; %v", modelName, err, cerr)
			}
			reply, err = s.complete(ctx, client)
		}
		if err != nil {
			return fmt.Errorf("model %s: %w", modelName, err)
		}
		if s.State() == Stopped {
			return context.Canceled // stopped while the model answered: the reply is not taken
		}
		s.mu.Lock()
		s.usage.ModelCalls++
		s.usage.addTokens(usageEvent(reply.Usage))
		s.usage.Retries += int64(reply.Retries)
		s.mu.Unlock()
		s.svc.spent(s) // a goal above whose budget this used up ends, interrupting this turn
		// The conversation takes the reply once it is recorded, so replay rebuilds the same one.
		asst := event.AssistantMessage{Text: reply.Text, ToolCalls: toolCallsEvent(reply.ToolCalls), Usage: usageEvent(reply.Usage), Retries: reply.Retries,
			Finish: unnaturalFinish(reply.FinishReason)}
		if len(reply.ToolCalls) == 0 {
			if _, err := s.append(ctx, asst); err != nil {
				return err
			}
		} else if err := s.appendWritten(ctx, asst, event.ToolStarted{CallID: reply.ToolCalls[0].ID, Code: reply.ToolCalls[0].Code}); err != nil {
			// The reply and its first cell's start share one write; the cell runs once they
			// are in the file, its fsync running meanwhile.
			return err
		}
		s.mu.Lock()
		s.conv = append(s.conv, model.Message{Role: "assistant", Content: reply.Text, ToolCalls: reply.ToolCalls})
		s.mu.Unlock()
		s.announce()
		if len(reply.ToolCalls) == 0 {
			s.mu.Lock()
			s.lastAnswer = reply.Text
			s.mu.Unlock()
			return nil
		}
		for i, call := range reply.ToolCalls {
			out, err := s.runTool(ctx, call, i == 0)
			if err != nil {
				return err
			}
			s.mu.Lock()
			s.conv = append(s.conv, model.Message{Role: "tool", ToolCallID: call.ID, Content: out})
			s.mu.Unlock()
		}
	}
	return stepLimitError(steps)
}

// complete calls the model with the session's context. Retries (429, 5xx, timeouts, a stream
// cut mid-reply) are recorded as they happen, so a flaky endpoint is visible in the log.
func (s *Session) complete(ctx context.Context, client *model.Client) (*model.Reply, error) {
	s.mu.Lock()
	block := s.harness.block
	s.mu.Unlock()
	req := model.Request{System: systemPrompt(s.meta) + block, Messages: s.conversation(),
		OnRetry: func(n int, err error) {
			s.awaitCheckpoint()
			s.append(ctx, event.ModelRetry{Retry: n, Error: err.Error()})
		}}
	return client.Complete(ctx, req, nil)
}

// unnaturalFinish keeps a finish reason other than the reply's natural end.
func unnaturalFinish(r string) string {
	switch r {
	case "", "stop", "tool_calls", "function_call":
		return ""
	}
	return r
}

func toolCallsEvent(calls []model.ToolCall) []event.ToolCall {
	var out []event.ToolCall
	for _, c := range calls {
		out = append(out, event.ToolCall{ID: c.ID, Code: c.Code})
	}
	return out
}

func toolCallsModel(calls []event.ToolCall) []model.ToolCall {
	var out []model.ToolCall
	for _, c := range calls {
		out = append(out, model.ToolCall{ID: c.ID, Code: c.Code})
	}
	return out
}

func usageEvent(u model.Usage) event.TokenUsage {
	return event.TokenUsage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens, OutputTokens: u.OutputTokens,
		CostUSD: u.CostUSD, Estimated: u.Estimated}
}

// deliver moves pending messages into the conversation: all of them at a turn's start, and
// the steering ones (mode steer or auto) before later model calls.
func (s *Session) deliver(ctx context.Context, turnStart bool) error {
	s.mu.Lock()
	var take, keep []pendingMsg
	for _, m := range s.pending {
		if turnStart || m.Mode != "follow_up" {
			take = append(take, m)
		} else {
			keep = append(keep, m)
		}
	}
	s.pending = keep
	s.mu.Unlock()
	if len(take) > 0 {
		s.awaitCheckpoint()
	}
	for _, m := range take {
		text := m.Text
		switch m.From {
		case "user", "task":
		case "goal": // the goal loop's own continuation says what it is
		case "heartbeat": // so does a heartbeat's text
		default:
			text = fmt.Sprintf("[message from %s]\n%s", m.From, m.Text)
		}
		if _, err := s.append(ctx, event.UserMessage{Text: text, From: m.From, QueuedSeq: m.Seq}); err != nil {
			return err
		}
		s.mu.Lock()
		s.conv = append(s.conv, model.Message{Role: "user", Content: text})
		if m.From != "goal" && m.From != "heartbeat" {
			s.inbound++ // a heartbeat's delivery is a prompt to work, not work done
		}
		s.mu.Unlock()
	}
	return nil
}

func (s *Session) conversation() []model.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]model.Message(nil), s.conv...)
}

// runTool executes one python call, bounding what the model sees. A failing cell is not an
// error of the turn: its traceback goes to the model. started says its tool_started is
// recorded already (with the reply that asked for it).
func (s *Session) runTool(ctx context.Context, call model.ToolCall, started bool) (string, error) {
	s.awaitCheckpoint() // a cell runs on the files the previous one left, checkpointed
	if !started {
		if _, err := s.append(ctx, event.ToolStarted{CallID: call.ID, Code: call.Code}); err != nil {
			return "", err
		}
	}
	start := time.Now()
	// A new session's first cell may find its worktree still being written.
	waited, err := s.awaitWorktree(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := "the python tool is unavailable: the session's worktree could not be made: " + err.Error()
		s.append(ctx, event.ToolFinished{CallID: call.ID, Status: "unavailable", Output: msg, Error: err.Error(), WorktreeWaitMs: waited.Milliseconds()})
		return msg, nil
	}
	k, notice, err := s.ensureKernel(ctx)
	if err != nil {
		msg := "the python tool is unavailable: " + err.Error()
		s.append(ctx, event.ToolFinished{CallID: call.ID, Status: "unavailable", Output: msg, Error: err.Error()})
		return msg, nil
	}
	cellTimeout, _ := s.cfg.Durations()
	var res *kernel.Result
	stream := newCellStream(ctx, s, call.ID)
	defer stream.close() // also when Execute panics: nothing streamed lands after the turn's end
	opts := execOptions(cellTimeout)
	opts.OnOutput = stream.onOutput
	s.ws.slots.lendWhile(ctx, s, func() { res, err = k.Execute(ctx, call.Code, opts) })
	stream.close() // what it printed is in the log before its end, also when it was stopped
	if err == nil && s.svc.opts.CellRan != nil {
		s.svc.opts.CellRan(s.meta.ID, res.Duration)
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := "the kernel failed: " + err.Error()
		s.append(ctx, event.ToolFinished{CallID: call.ID, Status: "failed", Output: msg, Error: err.Error()})
		return msg, nil
	}
	s.mu.Lock()
	s.usage.KernelExecs++
	s.lastCell = max(s.lastCell, res.ExecutionCount)
	s.mu.Unlock()
	redact := s.redactor()
	text := redact(res.Text)
	rich, richNote, err := saveRich(res.Outputs, s.artifactsDir())
	if err != nil {
		s.svc.log.Warn("save rich output", "session", s.meta.ID, "err", err)
	}
	if richNote != "" {
		text = strings.TrimRight(text, "\n") + "\n" + richNote
	}
	if notice != "" {
		text = "[arbor] " + notice + "\n" + text
	}
	if res.Notice != "" {
		text += "\n[arbor] " + res.Notice
	}
	if strings.TrimSpace(text) == "" {
		text = "(no output)"
	}
	ref := fmt.Sprintf("_arbor_out[%d]", res.ExecutionCount)
	b, err := boundOutput(text, s.cfg.OutputBudget, s.artifactsDir(), ref)
	if err != nil {
		s.svc.log.Warn("bound tool output", "session", s.meta.ID, "err", err)
	}
	if b.Cut {
		s.keepFullOutput(ctx, k, res.ExecutionCount, b.Artifact)
	}
	fin := event.ToolFinished{
		CallID: call.ID, Status: res.Status, Output: b.Text, Bytes: b.Bytes,
		DurationMs: time.Since(start).Milliseconds(), ExecutionCount: res.ExecutionCount, Rich: rich,
		WorktreeWaitMs: waited.Milliseconds(),
	}
	if b.Cut {
		fin.Artifact = b.Artifact
	}
	if res.Error != nil {
		fin.Error = redact(res.Error.Name + ": " + res.Error.Value)
	}
	// The result is in the file before the model sees it; its fsync runs meanwhile.
	if err := s.appendWritten(ctx, fin); err != nil {
		return "", err
	}
	// A cell that changed files is checkpointed right after its result, so a fork at any seq
	// starts from the files its inherited conversation describes (see Fork).
	s.mu.Lock()
	turn := s.turn
	s.mu.Unlock()
	s.checkpointCell(ctx, turn, fmt.Sprintf("arbor: turn %d, cell %d of session %s", turn, res.ExecutionCount, s.meta.ID))
	return b.Text, nil
}

// keepFullOutput puts the whole text of a cut output into the kernel as _arbor_out[cell] and
// _arbor_out[-1] (L2), so the model slices it instead of rereading. It travels through the
// kernel's own state directory, the one place of the session's a sandboxed kernel can read, and
// runs hidden, so the model's cell numbers stay its own.
func (s *Session) keepFullOutput(ctx context.Context, k *kernel.Kernel, cell int, artifact string) {
	tmp := filepath.Join(s.dir, "kernel", fmt.Sprintf("out-%d.txt", cell))
	if err := os.Link(artifact, tmp); err != nil {
		if err := copyFile(artifact, tmp); err != nil {
			s.svc.log.Warn("keep full output in the kernel", "session", s.meta.ID, "err", err)
			return
		}
	}
	defer os.Remove(tmp)
	code := fmt.Sprintf("_arbor_out = globals().get('_arbor_out') if isinstance(globals().get('_arbor_out'), dict) else {}\n"+
		"with open(%q, encoding='utf-8', errors='replace') as _f:\n    _arbor_out[%d] = _arbor_out[-1] = _f.read()\ndel _f", tmp, cell)
	if r, err := k.ExecuteHidden(ctx, code); err != nil || r.Status != "ok" {
		s.svc.log.Warn("keep full output in the kernel", "session", s.meta.ID, "err", err, "status", statusOf(r))
	}
}

func statusOf(r *kernel.Result) string {
	if r == nil {
		return ""
	}
	return r.Status + " " + r.Text
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

// checkpoint commits the worktree onto the session branch when the turn changed it.
func (s *Session) checkpoint(ctx context.Context, turn int) {
	s.checkpointAs(ctx, turn, fmt.Sprintf("arbor: turn %d of session %s", turn, s.meta.ID))
}

// checkpointAs commits what changed since the last checkpoint, if anything, as part of turn.
func (s *Session) checkpointAs(ctx context.Context, turn int, title string) {
	if s.unwritten() {
		return // a child's turn that needed no files: none were written
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := s.awaitWorktree(ctx); err != nil {
		s.append(ctx, event.TurnFailed{Turn: turn, Error: "checkpoint: " + err.Error(), Checkpoint: true})
		return
	}
	touched := s.touched()
	if touched != nil && len(touched) == 0 {
		return // the watcher saw no change since the last checkpoint
	}
	msg := title + "\n\n" + firstLine(s.meta.Task)
	commit, changed, err := s.ws.Repo.Checkpoint(ctx, s.meta.Worktree, msg, touched)
	if err != nil {
		// The watcher's record was taken: drop the watcher so the next checkpoint scans
		// everything and this turn's changes are not left out.
		s.mu.Lock()
		w := s.watch
		s.watch = nil
		s.mu.Unlock()
		if w != nil {
			w.Close()
		}
		s.append(ctx, event.TurnFailed{Turn: turn, Error: "checkpoint: " + err.Error(), Checkpoint: true})
		return
	}
	if !changed {
		return
	}
	s.mu.Lock()
	s.head = commit
	s.mu.Unlock()
	spend := s.svc.spend(s)
	s.append(ctx, event.Checkpoint{Turn: turn, Commit: commit, Spend: &spend})
}

// checkpointCell checkpoints what a cell changed while the turn goes on to ask the model what
// next: the model's latency hides the checkpoint's. Whatever the turn does next that
// records or runs anything waits for it first (awaitCheckpoint), so the records keep their
// order (a cell's result, its checkpoint, then the next reply) and a cell never runs before the
// previous one's files are committed.
func (s *Session) checkpointCell(ctx context.Context, turn int, title string) {
	done := make(chan struct{})
	s.mu.Lock()
	s.cellCheckpoint = done
	s.mu.Unlock()
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				s.svc.log.Error("panic in a cell's checkpoint", "session", s.meta.ID, "turn", turn, "panic", p, "stack", string(debug.Stack()))
			}
		}()
		s.checkpointAs(ctx, turn, title)
	}()
}

// awaitCheckpoint waits for the checkpoint checkpointCell started, if one runs.
func (s *Session) awaitCheckpoint() {
	s.mu.Lock()
	done := s.cellCheckpoint
	s.cellCheckpoint = nil
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// touched returns the worktree paths changed since the last checkpoint, or nil (scan
// everything) when the watcher is missing or its record may be incomplete. The first call
// starts the watcher, so the first checkpoint of a session always scans.
func (s *Session) touched() []string {
	s.mu.Lock()
	w := s.watch
	s.mu.Unlock()
	if w == nil {
		nw, err := workspace.Watch(s.meta.Worktree, s.svc.log)
		if err != nil {
			s.svc.log.Debug("watch worktree; checkpoints scan", "session", s.meta.ID, "err", err)
			return nil
		}
		s.mu.Lock()
		s.watch = nw
		s.mu.Unlock()
		return nil
	}
	w.Sync(2 * time.Second)
	paths, complete := w.Take()
	if w.Stale() {
		// A directory moved: the watches below it name old paths. Scan now, watch afresh.
		s.mu.Lock()
		s.watch = nil
		s.mu.Unlock()
		w.Close()
		return nil
	}
	if !complete {
		return nil
	}
	if paths == nil {
		paths = []string{}
	}
	return paths
}

// notifyParent tells the parent that this child's turn ended, with its final answer, when the
// child did not message the parent itself: no result is ever lost, and the parent needs no
// polling to learn of it.
func (s *Session) notifyParent(turnErr error) {
	if s.meta.Parent == "" || s.svc.ctx.Err() != nil || s.State() == Stopped {
		return
	}
	s.mu.Lock()
	told, answer := s.toldParent, s.lastAnswer
	s.mu.Unlock()
	if told && turnErr == nil {
		return
	}
	p, err := s.svc.Get(s.meta.Parent)
	if err != nil {
		return
	}
	// The delivery labels the notice with the sender ("[message from child tests]"): the text
	// says what happened, not who it is again.
	var text string
	if turnErr != nil {
		text = fmt.Sprintf("[arbor] its turn failed: %v", turnErr)
	} else {
		if len(answer) > 2000 {
			answer = answer[:2000] + " …[cut; see arbor log " + s.meta.ID[:8] + "]"
		}
		text = fmt.Sprintf("[arbor] it finished its turn on branch %s without messaging you; its final answer:\n%s", s.meta.Branch, answer)
	}
	if _, err := p.enqueue(s.svc.ctx, p.relationLabel(s), text, "auto"); err != nil {
		s.svc.log.Warn("completion notice", "child", s.meta.ID, "parent", p.meta.ID, "err", err)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 72 {
		s = s[:72]
	}
	return s
}
