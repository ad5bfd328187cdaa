package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// Execute runs one cell and waits for it to finish: the execute_reply and the kernel's return to
// idle on iopub. Cell errors are Status "error"; the returned error is for failures of Arbor
// itself, a dead or closed kernel (ErrDead), or ctx ending (the cell is then interrupted).
//
// A cell that outlives opts.Timeout climbs a ladder, each rung waiting Options.InterruptGrace:
// interrupt_request → SIGINT to the process group → restart with the namespace restored from the
// latest snapshot. Result.Notice says which rung stopped it.
func (k *Kernel) Execute(ctx context.Context, code string, opts ExecOptions) (*Result, error) {
	select {
	case k.execSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("execute: %w", ctx.Err())
	}
	defer func() { <-k.execSem }()
	p, revived, err := k.ensureRunning(ctx)
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	if err := k.finishAdopt(ctx); err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	k.flushSnapshot(ctx)
	budget := p.budget.Counters()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	start := time.Now()
	h, box, err := p.ch.request(shellChan, "execute_request", map[string]any{
		"code":             code,
		"silent":           false,
		"store_history":    true,
		"user_expressions": map[string]any{},
		// input() raises StdinNotImplementedError at once: the model reads it, nothing hangs.
		"allow_stdin": false,
		// Independent cells: the default (true) aborts requests queued after an error.
		"stop_on_error": false,
	})
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	defer p.ch.unregister(h.MsgID)

	defer k.markDirty()
	st := &execState{res: &Result{}, onOutput: opts.OnOutput, max: opts.MaxOutput}
	defer func() { k.cells = max(k.cells, st.res.ExecutionCount) }()
	if st.max == 0 {
		st.max = DefaultMaxOutput
	}
	if revived != "" {
		st.notice(revived)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	rung := 0
	grace := k.opts.grace()
	done := ctx.Done()
	var abandoned error // the caller's ctx ended: the ladder runs at once, then Execute says so
	for !st.finished() {
		select {
		case <-box.notify:
			st.handleAll(box.take())
		case <-p.exited:
			st.handleAll(box.take())
			if st.finished() {
				break
			}
			if k.isClosed() {
				return nil, fmt.Errorf("execute: kernel closed during the cell: %w", ErrDead)
			}
			st.res.Status = StatusDied
			n := fmt.Sprintf("The kernel process died while running this cell (%s); its live variables are lost.", exitReason(p))
			if p.gw != nil {
				n = fmt.Sprintf("The kernel on the gateway was lost while running this cell (%s); its live variables are lost.", exitReason(p))
			}
			if b := p.budgetNotice(budget, st.res, true); b != "" {
				n += " " + b
			}
			if k.opts.Revive {
				n += " The next cell starts a new kernel with the latest snapshot restored."
			}
			st.notice(n)
			st.res.Duration = time.Since(start)
			return st.res, nil
		case <-done:
			// The caller gave up (a turn stopped). Returning now would leave a cell that
			// ignores the interrupt running unseen, and a snapshot or park queued behind it
			// forever: climb the ladder at once, so the kernel is free (or restarted) when
			// Execute returns.
			abandoned, done = ctx.Err(), nil
			timer.Reset(0)
		case <-timer.C:
			rung++
			switch rung {
			case 1:
				if abandoned != nil {
					k.log.Info("kernel: cell abandoned by its caller; sending interrupt_request", "why", abandoned)
				} else {
					k.log.Info("kernel: cell timed out; sending interrupt_request", "timeout", timeout)
				}
				st.interrupted = "interrupt_request"
				if err := p.ch.send(controlChan, newHeader(p.ch.sessionID(), "interrupt_request"), struct{}{}); err != nil {
					k.log.Warn("kernel: interrupt_request", "err", err)
				}
			case 2:
				k.log.Info("kernel: cell ignored interrupt_request; sending " + p.interruptName())
				st.interrupted = p.interruptName()
				if err := p.signal(syscall.SIGINT); err != nil {
					k.log.Warn("kernel: SIGINT", "err", err)
				}
			default:
				k.log.Warn("kernel: cell ignored SIGINT; restarting the kernel")
				st.res.Status = StatusTimeout
				notice := fmt.Sprintf("The cell ran past its %v timeout and ignored interrupt_request and SIGINT, so Arbor killed and restarted the kernel.", timeout)
				if p.gw != nil {
					notice = fmt.Sprintf("The cell ran past its %v timeout and ignored interrupt_request and the gateway's interrupt, so Arbor restarted the kernel through the gateway.", timeout)
				}
				k.cells = max(k.cells, st.res.ExecutionCount)
				if m, err := k.replace(context.WithoutCancel(ctx), p); err != nil {
					notice += fmt.Sprintf(" The restart failed (%v); the kernel is not running.", err)
				} else {
					notice += " " + k.restoreNotice(m)
				}
				if abandoned != nil {
					return nil, fmt.Errorf("execute: %w", abandoned)
				}
				st.notice(notice)
				st.res.Duration = time.Since(start)
				return st.res, nil
			}
			timer.Reset(grace)
		}
	}
	if abandoned != nil {
		return nil, fmt.Errorf("execute: %w", abandoned)
	}
	if p.gw != nil && st.interrupted == "" && st.res.Error != nil && st.res.Error.Name == "KeyboardInterrupt" {
		// A gateway shutting its kernels down interrupts them first: the cell ends with a
		// KeyboardInterrupt nobody here sent, and the shutdown follows at once. Say so.
		select {
		case <-p.exited:
			st.finish()
			st.res.Status = StatusDied
			st.notice(fmt.Sprintf("The kernel on the gateway was stopped while running this cell (%s); its live variables are lost.", exitReason(p)))
			if k.opts.Revive {
				st.notice("The next cell starts a new kernel with the latest snapshot restored.")
			}
			st.res.Duration = time.Since(start)
			return st.res, nil
		case <-time.After(time.Second):
		}
	}
	st.finish()
	if n := p.budgetNotice(budget, st.res, false); n != "" {
		st.notice(n)
	}
	if st.interrupted != "" {
		st.res.Status = StatusTimeout
		st.notice(fmt.Sprintf("The cell ran past its %v timeout; Arbor stopped it with %s. The kernel and its variables are intact.", timeout, st.interrupted))
	}
	st.res.Duration = time.Since(start)
	return st.res, nil
}

// restoreNotice tells the model what a new process brought back, and which cells' work is not
// in it. The caller holds execSem.
func (k *Kernel) restoreNotice(m *Manifest) string {
	if m == nil {
		return "No snapshot existed, so the namespace is empty: re-run imports and setup."
	}
	n := "Restored from the latest snapshot: " + m.Summary() + "."
	if m.Error == "" && m.Cell > 0 && m.Cell < k.cells {
		n += fmt.Sprintf(" Cells %d–%d ran after that snapshot: what they assigned is gone.", m.Cell+1, k.cells)
	}
	return n
}

func exitReason(p *proc) string {
	why := "exit status 0"
	if p.waitErr != nil {
		why = p.waitErr.Error()
	}
	if p.budget != nil && p.atExit.OOMKills > 0 {
		why += fmt.Sprintf("; its memory limit of %s killed %d process(es), %s raises it",
			sandbox.FormatBytes(p.budget.Limits.Memory), p.atExit.OOMKills, sandbox.SettingMemory)
	}
	return why
}

// execState accumulates the messages of one execute request.
type execState struct {
	res         *Result
	onOutput    func(Output)
	text        strings.Builder
	replied     bool
	idle        bool
	interrupted string // the ladder rung that was used, if any
	replyErr    *ExecError

	max     int    // in-memory output bound (negative: none)
	tail    []byte // rolling tail once over the bound
	dropped int    // bytes past the head
}

func (s *execState) finished() bool { return s.replied && s.idle }

// finish fills in what only the reply said, once the cell is over.
func (s *execState) finish() {
	if s.res.Error == nil && s.replyErr != nil {
		s.res.Error = s.replyErr
		s.emit(Output{Kind: KindError, Text: errorText(s.replyErr)})
	}
	s.res.Text = s.fullText()
}

func (s *execState) notice(n string) {
	if s.res.Notice != "" {
		s.res.Notice += " "
	}
	s.res.Notice += n
	s.res.Text = s.fullText()
}

func (s *execState) handleAll(ms []*message) {
	for _, m := range ms {
		s.handle(m)
	}
}

func (s *execState) emit(o Output) {
	if s.onOutput != nil {
		s.onOutput(o)
	}
	text := o.Text
	if o.Kind != KindStdout && o.Kind != KindStderr && text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if s.max < 0 || s.text.Len()+len(text) <= s.max/2 && s.dropped == 0 {
		s.res.Outputs = append(s.res.Outputs, o)
		s.text.WriteString(text)
		return
	}
	// Over the bound: fill the head to max/2, keep a rolling tail of max/2, count the rest.
	if room := s.max/2 - s.text.Len(); room > 0 && s.dropped == 0 {
		s.text.WriteString(text[:room])
		text = text[room:]
	}
	s.dropped += len(text)
	s.tail = append(s.tail, text...)
	if keep := s.max / 2; len(s.tail) > 2*keep {
		s.tail = append(s.tail[:0], s.tail[len(s.tail)-keep:]...)
	}
}

// text returns the retained output, with a marker where the middle was dropped.
func (s *execState) fullText() string {
	if s.dropped == 0 {
		return s.text.String()
	}
	tail := s.tail
	if keep := s.max / 2; len(tail) > keep {
		tail = tail[len(tail)-keep:]
	}
	omitted := s.dropped - len(tail)
	return strings.ToValidUTF8(s.text.String(), "") +
		fmt.Sprintf("\n[… %d bytes of output omitted: over Arbor's in-memory bound of %d bytes …]\n", omitted, s.max) +
		strings.ToValidUTF8(string(tail), "")
}

func (s *execState) handle(m *message) {
	switch m.Header.MsgType {
	case "stream":
		name, text, err := decodeStream(m.Content)
		if err != nil {
			return
		}
		kind := KindStdout
		if name == "stderr" {
			kind = KindStderr
		}
		s.emit(Output{Kind: kind, Text: text})
	case "execute_result", "display_data", "update_display_data":
		var c struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Content, &c) != nil {
			return
		}
		kind := KindDisplay
		if m.Header.MsgType == "execute_result" {
			kind = KindResult
		}
		s.emit(Output{Kind: kind, Text: plainText(c.Data), Data: c.Data})
	case "error":
		e := decodeError(m.Content)
		if e == nil {
			return
		}
		if s.res.Error == nil {
			s.res.Error = e
		}
		s.emit(Output{Kind: KindError, Text: errorText(e)})
	case "status":
		var c struct {
			State string `json:"execution_state"`
		}
		if json.Unmarshal(m.Content, &c) == nil && c.State == "idle" {
			s.idle = true
		}
	case "execute_reply":
		var c struct {
			Status         string `json:"status"`
			ExecutionCount int    `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &c) != nil {
			return
		}
		s.replied = true
		s.res.Status = c.Status
		s.res.ExecutionCount = c.ExecutionCount
		switch c.Status {
		case StatusError:
			// The iopub error usually trails the reply; it is the one shown. The reply's copy
			// is used only if iopub never delivers one (see finish).
			s.replyErr = decodeError(m.Content)
		case StatusAborted:
			s.notice("The kernel aborted this cell without running it.")
		case StatusOK:
		default:
			s.res.Status = StatusError
		}
	}
}

func plainText(data map[string]json.RawMessage) string {
	raw, ok := data["text/plain"]
	if !ok {
		var kinds []string
		for k := range data {
			kinds = append(kinds, k)
		}
		return "<" + strings.Join(kinds, ", ") + " output>"
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return ansiRE.ReplaceAllString(s, "")
}

func decodeError(content json.RawMessage) *ExecError {
	var c struct {
		Ename     string   `json:"ename"`
		Evalue    string   `json:"evalue"`
		Traceback []string `json:"traceback"`
	}
	if json.Unmarshal(content, &c) != nil || c.Ename == "" {
		return nil
	}
	e := &ExecError{Name: c.Ename, Value: stripANSI(c.Evalue)}
	for _, l := range c.Traceback {
		e.Traceback = append(e.Traceback, stripANSI(l))
	}
	return e
}

func errorText(e *ExecError) string {
	if len(e.Traceback) == 0 {
		return e.Name + ": " + e.Value + "\n"
	}
	return strings.Join(e.Traceback, "\n") + "\n"
}
