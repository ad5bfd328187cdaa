package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
)

// The outcomes of a journal entry found at start, as arbor/daemon.status reports them.
const (
	outcomeReplayed       = "replayed"
	outcomeAlreadyApplied = "already applied"
	outcomeNotReplayed    = "not replayed"
	outcomeFailed         = "replay failed"
	outcomeCorrupt        = "corrupt"
)

// interruptions are the journal entries this daemon found at its start and what became of them.
type interruptions struct {
	mu   sync.Mutex
	list []InterruptedRequest
}

func (in *interruptions) add(r InterruptedRequest) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.list = append(in.list, r)
}

func (in *interruptions) get() []InterruptedRequest {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]InterruptedRequest(nil), in.list...)
}

// journalStamp takes the receive seq of a request that is journalled, else 0.
func (s *Server) journalStamp(method string) int64 {
	if s.journal == nil || !journalRules[method].journalled() {
		return 0
	}
	return s.journal.stamp()
}

// replayJournal replays, once and in receive order, the entries an earlier daemon left: it runs
// after session recovery and before any client request is served.
func (s *Server) replayJournal(ctx context.Context) {
	if s.journal == nil {
		return
	}
	j := s.journal
	for _, b := range j.bad {
		s.log.Error("request journal: corrupt line skipped; a request it held was never run", "file", j.path, "line", b.line, "err", b.err, "copy", j.kept)
		s.interrupted.add(InterruptedRequest{Outcome: outcomeCorrupt,
			Detail: fmt.Sprintf("%s %s (a copy is kept as %s). A request it held was never run: send it again if it mattered", j.path, b, j.kept)})
	}
	for _, e := range j.leftover {
		var out InterruptedRequest
		switch err := j.replaying(e); {
		case e.attempted:
			out = InterruptedRequest{Method: e.Method, Received: e.Received(), Outcome: outcomeFailed,
				Detail: "an earlier start of the daemon began replaying it and died before it finished; it is not replayed again: check its effect and send it again if it is missing"}
			if rule := journalRules[e.Method]; rule.session != nil {
				out.Session = rule.session(e.Params)
			}
		case err != nil:
			out = InterruptedRequest{Method: e.Method, Received: e.Received(), Outcome: outcomeFailed,
				Detail: "not replayed: the journal could not record the replay: " + err.Error()}
		default:
			out = s.replayEntry(ctx, e)
		}
		s.log.Warn("request journal: a request received before the daemon stopped",
			"method", e.Method, "received", out.Received, "session", out.Session, "outcome", out.Outcome, "detail", out.Detail)
		s.interrupted.add(out)
		if err := j.done(e); err != nil {
			s.log.Error("request journal", "err", err)
		}
	}
	j.reset()
}

// replayEntry applies one entry's rule.
func (s *Server) replayEntry(ctx context.Context, e *journalEntry) InterruptedRequest {
	out := InterruptedRequest{Method: e.Method, Received: e.Received()}
	rule, known := journalRules[e.Method]
	r, routed := routes[e.Method]
	if rule.session != nil {
		out.Session = rule.session(e.Params)
	}
	switch {
	case !known || !routed || !rule.journalled():
		out.Outcome, out.Detail = outcomeNotReplayed, "this daemon does not replay "+clip(e.Method, maxEcho)
		return out
	case rule.policy == reportOnly:
		out.Outcome = outcomeNotReplayed
		out.Detail = "the daemon stopped before it answered; it may or may not have been done, and it is not redone: " + rule.why
		return out
	case rule.policy == replayKeyed:
		applied, err := s.agents.RequestApplied(out.Session, e.Key)
		if err != nil {
			out.Outcome, out.Detail = outcomeFailed, err.Error()
			return out
		}
		if applied {
			out.Outcome = outcomeAlreadyApplied
			return out
		}
	}
	c := &conn{srv: s, log: s.log, rootDir: e.RootDir}
	res, err := c.run(withRequestKey(ctx, e.Key), r, e.Params)
	if err != nil {
		out.Outcome, out.Detail = outcomeFailed, clip(err.Error(), maxErrorMessage)
		return out
	}
	out.Outcome = outcomeReplayed
	if sess, ok := res.(*Session); ok && sess != nil && out.Session == "" {
		out.Session = sess.ID
	}
	return out
}

// crashPoint kills the daemon with SIGKILL at a point DaemonOptions.CrashAt names: a test hook
// that makes the daemon die between journalling a request and running it ("before") or between
// running it and answering ("after").
func (s *Server) crashPoint(method, when string) {
	if s.opts.CrashAt == "" || s.opts.CrashAt != "journal:"+method+":"+when {
		return
	}
	s.log.Warn("crash point reached: killing the daemon", "at", s.opts.CrashAt)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// validCrashAt checks the CrashAt option's shape.
func validCrashAt(v string) bool {
	if v == "" {
		return true
	}
	parts := strings.Split(v, ":")
	return len(parts) == 3 && parts[0] == "journal" && journalRules[parts[1]].journalled() && (parts[2] == "before" || parts[2] == "after")
}
