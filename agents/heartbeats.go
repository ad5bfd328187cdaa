package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/heartbeat"
)

// maxHeartbeats bounds the heartbeats of one session: model code in a loop cannot fill the
// daemon's schedule.
const maxHeartbeats = 256

// heartbeats owns the service's heartbeats: one scheduler (one timer) for all of them and a
// store per session (sessions/<id>/heartbeats.json).
//
// A tick is claimed before it is delivered: the claim (run N, standing for Count runs) is
// written to the store, then the message is queued with the run in its message_queued
// record, then the store says delivered. A crash after the claim leaves the session's log to
// decide at the next start: the record is there (delivered, nothing more to do) or it is not
// (delivered then, once). A tick that comes while the session runs a turn is counted and
// waits; when the turn ends (heartbeatsFree) every run waiting is delivered as one message
// with its count. Ticks missed while the daemon was down are counted by the scheduler at
// start into one tick.
type heartbeats struct {
	svc   *Service
	sched *heartbeat.Scheduler

	mu       sync.Mutex
	sessions map[string]*sessionBeats // by session id
	owner    map[string]string        // heartbeat id → session id
}

// sessionBeats is one session's heartbeats. Its mutex makes deciding a claim one step with
// reading the session's business, so a tick and the end of a turn cannot both leave a run
// waiting with nobody to deliver it. Lock order: sessionBeats.mu, then Session.mu.
type sessionBeats struct {
	sess     *Session
	store    *heartbeat.Store
	mu       sync.Mutex
	inflight map[string]bool // heartbeats with a claimed run being delivered
	// unrecorded counts ticks whose store write failed, recorded with the next one.
	unrecorded map[string]int
}

func newHeartbeats(svc *Service) *heartbeats {
	h := &heartbeats{svc: svc, sessions: map[string]*sessionBeats{}, owner: map[string]string{}}
	h.sched = heartbeat.NewScheduler(h.fired)
	return h
}

func (h *heartbeats) close() { h.sched.Close() }

// HeartbeatStats returns the heartbeat scheduler's counters (wake-ups, ticks).
func (s *Service) HeartbeatStats() heartbeat.Stats { return s.beats.sched.Stats() }

// fired runs on the scheduler's goroutine, which must not wait on disks.
func (h *heartbeats) fired(id string, t heartbeat.Tick) {
	h.svc.spawn(func() { h.tick(id, t) })
}

func (h *heartbeats) lookup(id string) *sessionBeats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[h.owner[id]]
}

// storeOf returns the session's heartbeats, opening their store on first use.
func (h *heartbeats) storeOf(sess *Session) (*sessionBeats, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sb := h.sessions[sess.meta.ID]; sb != nil {
		return sb, nil
	}
	st, err := heartbeat.Open(filepath.Join(sess.dir, "heartbeats.json"))
	if err != nil {
		return nil, err
	}
	sb := &sessionBeats{sess: sess, store: st, inflight: map[string]bool{}, unrecorded: map[string]int{}}
	h.sessions[sess.meta.ID] = sb
	for _, hb := range st.List() {
		h.owner[hb.ID] = sess.meta.ID
	}
	return sb, nil
}

// tick counts a heartbeat's due times and delivers them now or leaves them waiting.
func (h *heartbeats) tick(id string, t heartbeat.Tick) {
	sb := h.lookup(id)
	if sb == nil {
		return
	}
	sess := sb.sess
	ctx := h.svc.ctx
	sb.mu.Lock()
	var claim *event.HeartbeatRef
	count := t.Count + sb.unrecorded[id] // ticks an earlier failed write could not record
	hb, err := sb.store.Update(id, func(hb *heartbeat.Heartbeat) bool {
		hb.Ticks += count
		if t.Next.After(hb.Next) {
			hb.Next = t.Next
		}
		claim = sb.claimLocked(hb)
		return true
	})
	if err != nil {
		if claim != nil {
			delete(sb.inflight, id) // the claim was not written: nothing is delivered
		}
		if !errors.Is(err, heartbeat.ErrNotFound) { // deleted meanwhile
			// Kept in memory and recorded with the next tick: a failed write loses no run.
			sb.unrecorded[id] = count
			h.svc.log.Error("heartbeat tick", "session", sess.meta.ID, "heartbeat", id, "err", err)
		}
		sb.mu.Unlock()
		return
	}
	delete(sb.unrecorded, id)
	sb.mu.Unlock()
	if claim != nil {
		h.deliver(sb, *claim)
		return
	}
	status := "coalesced"
	if sess.State() == Stopped {
		status = "stopped"
		h.sched.Remove(id) // it can never be delivered; `arbor heartbeats` still lists it
	}
	sess.append(ctx, event.HeartbeatTick{ID: id, Run: hb.Ticks, Count: t.Count, Pending: hb.Pending(), Status: status})
}

// claimLocked claims every waiting run of hb for one delivery when the session can take it
// now: not running a turn (it gets the runs when the turn ends) and not stopped. An inactive
// session is revived by the delivery. The caller holds sb.mu and writes hb.
func (sb *sessionBeats) claimLocked(hb *heartbeat.Heartbeat) *event.HeartbeatRef {
	if sb.inflight[hb.ID] || hb.Pending() <= 0 {
		return nil
	}
	sb.sess.mu.Lock()
	// Any reservation — a turn, a merge, the move to inactive — holds the runs back; whoever
	// lets the session go hands them on (runTurns, release).
	busy := sb.sess.holder != free || sb.sess.state == Stopped
	sb.sess.mu.Unlock()
	if busy {
		return nil
	}
	ref := &event.HeartbeatRef{ID: hb.ID, Run: hb.Ticks, Count: hb.Pending()}
	hb.Claimed, hb.ClaimedCount = ref.Run, ref.Count
	sb.inflight[hb.ID] = true
	return ref
}

// pump delivers the waiting runs of heartbeat id if the session can take them now.
func (h *heartbeats) pump(sb *sessionBeats, id string) {
	sb.mu.Lock()
	var claim *event.HeartbeatRef
	_, err := sb.store.Update(id, func(hb *heartbeat.Heartbeat) bool {
		claim = sb.claimLocked(hb)
		return claim != nil
	})
	if err != nil && claim != nil {
		delete(sb.inflight, id) // the claim was not written: nothing is delivered
		claim = nil
		h.svc.log.Error("claim heartbeat", "session", sb.sess.meta.ID, "heartbeat", id, "err", err)
	}
	sb.mu.Unlock()
	if claim != nil {
		h.deliver(sb, *claim)
	}
}

// deliver queues the message of a claimed run, then records it delivered; runs that came
// meanwhile are delivered next, when the session can take them.
func (h *heartbeats) deliver(sb *sessionBeats, ref event.HeartbeatRef) {
	sess := sb.sess
	if hook := h.svc.opts.HeartbeatClaimed; hook != nil {
		hook(sess.meta.ID, ref.ID, ref.Run)
	}
	hb, ok := sb.store.Get(ref.ID)
	if !ok { // deleted while the claim was on its way: nothing to deliver
		sb.mu.Lock()
		delete(sb.inflight, ref.ID)
		sb.mu.Unlock()
		return
	}
	_, err := sess.enqueueMsg(h.svc.ctx, event.MessageQueued{From: "heartbeat", Text: heartbeatText(hb, ref), Mode: "follow_up", Heartbeat: &ref})
	if err != nil {
		h.svc.log.Warn("deliver heartbeat", "session", sess.meta.ID, "heartbeat", ref.ID, "run", ref.Run, "err", err)
	}
	sb.mu.Lock()
	_, uerr := sb.store.Update(ref.ID, func(hb *heartbeat.Heartbeat) bool {
		if err == nil {
			hb.Delivered = max(hb.Delivered, ref.Run)
		}
		if hb.Claimed == ref.Run { // on a failed delivery the runs wait again
			hb.Claimed, hb.ClaimedCount = 0, 0
		}
		return true
	})
	delete(sb.inflight, ref.ID)
	sb.mu.Unlock()
	if uerr != nil && !errors.Is(uerr, heartbeat.ErrNotFound) {
		// The message is in the session's log: the next start finds it and counts it delivered.
		h.svc.log.Warn("record heartbeat delivered", "session", sess.meta.ID, "heartbeat", ref.ID, "err", uerr)
	}
	if err == nil {
		h.pump(sb, ref.ID)
	}
}

// heartbeatText is what the model reads: which heartbeat, which run, how many it stands for.
func heartbeatText(hb heartbeat.Heartbeat, ref event.HeartbeatRef) string {
	head := fmt.Sprintf("[heartbeat %s, run %d (%s)]", ref.ID, ref.Run, hb.Describe())
	if ref.Count > 1 {
		head = fmt.Sprintf("[heartbeat %s, run %d (%s); it stands for %d ticks, runs %d–%d, that came while you were busy or the daemon was down]",
			ref.ID, ref.Run, hb.Describe(), ref.Count, ref.Run-ref.Count+1, ref.Run)
	}
	return head + "\n" + hb.Instruction
}

// heartbeatsFree is called when a session's turns have ended and it is free: the runs that
// came meanwhile are delivered now, one message per heartbeat.
func (s *Service) heartbeatsFree(sess *Session) {
	s.beats.mu.Lock()
	sb := s.beats.sessions[sess.meta.ID]
	s.beats.mu.Unlock()
	if sb == nil {
		return
	}
	for _, hb := range sb.store.List() {
		if hb.Pending() > 0 {
			s.beats.pump(sb, hb.ID)
		}
	}
}

// recoverHeartbeats brings back the heartbeats of a workspace's sessions: a claimed run is
// delivered unless the session's log holds its message, and every heartbeat is scheduled from
// its persisted next due time, so the ticks missed meanwhile come as one.
func (s *Service) recoverHeartbeats(ctx context.Context, ws *Workspace) {
	for _, sess := range s.all() {
		if sess.ws != ws {
			continue
		}
		if _, err := os.Stat(filepath.Join(sess.dir, "heartbeats.json")); err != nil {
			continue
		}
		sb, err := s.beats.storeOf(sess)
		if err != nil {
			s.log.Error("recover heartbeats", "session", sess.meta.ID, "err", err)
			continue
		}
		s.beats.recoverSession(sb)
	}
}

func (h *heartbeats) recoverSession(sb *sessionBeats) {
	sess := sb.sess
	hbs := sb.store.List()
	if len(hbs) == 0 {
		return
	}
	queued := map[event.HeartbeatRef]bool{}
	if recs, err := sess.Events(0); err == nil {
		for _, r := range recs {
			if r.Type != string(event.TypeMessageQueued) {
				continue
			}
			if q, err := event.As[event.MessageQueued](event.TypeMessageQueued, r.Data); err == nil && q.Heartbeat != nil {
				queued[event.HeartbeatRef{ID: q.Heartbeat.ID, Run: q.Heartbeat.Run}] = true
			}
		}
	}
	stopped := sess.State() == Stopped
	for _, hb := range hbs {
		if hb.Claimed > hb.Delivered {
			ref := event.HeartbeatRef{ID: hb.ID, Run: hb.Claimed, Count: hb.ClaimedCount}
			if queued[event.HeartbeatRef{ID: hb.ID, Run: hb.Claimed}] {
				sb.store.Update(hb.ID, func(hb *heartbeat.Heartbeat) bool {
					hb.Delivered, hb.Claimed, hb.ClaimedCount = hb.Claimed, 0, 0
					return true
				})
			} else if !stopped {
				sb.mu.Lock()
				sb.inflight[hb.ID] = true
				sb.mu.Unlock()
				h.deliver(sb, ref) // the claim stands: delivered now, once
			}
		}
		if stopped {
			continue
		}
		sch, err := hb.Schedule()
		if err != nil {
			h.svc.log.Error("recover heartbeat", "session", sess.meta.ID, "heartbeat", hb.ID, "err", err)
			continue
		}
		// The ticks missed while the daemon was down join the runs that were waiting, so they
		// all come as one message.
		next := hb.Next
		if n, nx := heartbeat.Count(sch, hb.Next, time.Now()); n > 0 {
			sb.mu.Lock()
			hb, err = sb.store.Update(hb.ID, func(hb *heartbeat.Heartbeat) bool {
				hb.Ticks += n
				hb.Next = nx
				return true
			})
			sb.mu.Unlock()
			if err != nil {
				h.svc.log.Error("recover heartbeat", "session", sess.meta.ID, "heartbeat", hb.ID, "err", err)
			} else {
				next = nx
			}
		}
		h.sched.Add(hb.ID, sch, next)
		if cur, ok := sb.store.Get(hb.ID); ok && cur.Pending() > 0 { // as it is now: a delivery above may have failed
			h.pump(sb, hb.ID)
		}
	}
}

// HeartbeatRequest makes a heartbeat: an instruction and one of Every and Cron.
type HeartbeatRequest struct {
	Instruction string
	Every       string // a Go duration, like "10m"
	Cron        string // a five-field cron expression, like "*/15 * * * *"
	RequestKey  string // the journal key of the client's request (see [Service.RequestApplied])
}

// HeartbeatInfo is a heartbeat as clients see it.
type HeartbeatInfo struct {
	heartbeat.Heartbeat
	Pending   int  `json:"pending"`   // runs due and not yet delivered
	Scheduled bool `json:"scheduled"` // false once its session is stopped
}

func (h *heartbeats) info(hb heartbeat.Heartbeat) HeartbeatInfo {
	_, on := h.sched.NextDue(hb.ID)
	return HeartbeatInfo{Heartbeat: hb, Pending: hb.Pending(), Scheduled: on}
}

// CreateHeartbeat adds a heartbeat to a session: from its next due time on, the instruction
// is delivered to the session as a message.
func (s *Service) CreateHeartbeat(ctx context.Context, session string, req HeartbeatRequest) (HeartbeatInfo, error) {
	sess, err := s.Get(session)
	if err != nil {
		return HeartbeatInfo{}, err
	}
	return s.beats.create(sess, req)
}

func (h *heartbeats) create(sess *Session, req HeartbeatRequest) (HeartbeatInfo, error) {
	if strings.TrimSpace(req.Instruction) == "" {
		return HeartbeatInfo{}, RequestError("heartbeat: the instruction is empty; say what the session should do at each tick")
	}
	if len(req.Instruction) > MaxMessageBytes {
		return HeartbeatInfo{}, RequestError(fmt.Sprintf("heartbeat: the instruction is %d bytes, over the %d-byte limit", len(req.Instruction), MaxMessageBytes))
	}
	now := time.Now().Round(0)
	sch, err := heartbeat.Parse(req.Every, req.Cron, now)
	if err != nil {
		return HeartbeatInfo{}, RequestError(err.Error())
	}
	if sess.State() == Stopped {
		return HeartbeatInfo{}, fmt.Errorf("%w: session %s is stopped, so a heartbeat would never be delivered; fork it to continue its work", ErrInvalidState, sess.meta.ID)
	}
	sb, err := h.storeOf(sess)
	if err != nil {
		return HeartbeatInfo{}, err
	}
	if n := len(sb.store.List()); n >= maxHeartbeats {
		return HeartbeatInfo{}, RequestError(fmt.Sprintf("heartbeat: session %s already has %d heartbeats (the limit); delete one first", sess.meta.ID, n))
	}
	hb := heartbeat.Heartbeat{ID: "hb" + newID()[:10], Session: sess.meta.ID, Instruction: req.Instruction,
		Every: req.Every, Cron: req.Cron, Created: now, Next: sch.Next(now), RequestKey: req.RequestKey}
	if err := sb.store.Put(hb); err != nil {
		return HeartbeatInfo{}, fmt.Errorf("heartbeat: %w", err)
	}
	h.mu.Lock()
	h.owner[hb.ID] = sess.meta.ID
	h.mu.Unlock()
	h.sched.Add(hb.ID, sch, hb.Next)
	return h.info(hb), nil
}

// Heartbeats lists the heartbeats of a session, or of every session when session is "".
func (s *Service) Heartbeats(session string) ([]HeartbeatInfo, error) {
	var sessions []*Session
	if session != "" {
		sess, err := s.Get(session)
		if err != nil {
			return nil, err
		}
		sessions = []*Session{sess}
	} else {
		sessions = s.all()
	}
	out := []HeartbeatInfo{}
	for _, sess := range sessions {
		s.beats.mu.Lock()
		sb := s.beats.sessions[sess.meta.ID]
		s.beats.mu.Unlock()
		if sb == nil {
			continue
		}
		for _, hb := range sb.store.List() {
			out = append(out, s.beats.info(hb))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Session != out[j].Session {
			return out[i].Session < out[j].Session
		}
		return out[i].Created.Before(out[j].Created)
	})
	return out, nil
}

// DeleteHeartbeat removes a heartbeat by id (or a unique prefix of at least 4 characters).
func (s *Service) DeleteHeartbeat(ctx context.Context, id string) (HeartbeatInfo, error) {
	return s.beats.delete("", id)
}

// delete removes heartbeat id; a session other than "" limits the search to its heartbeats.
func (h *heartbeats) delete(session, id string) (HeartbeatInfo, error) {
	h.mu.Lock()
	var found []string
	for hid, sid := range h.owner {
		if (hid == id || len(id) >= 4 && strings.HasPrefix(hid, id)) && (session == "" || sid == session) {
			found = append(found, hid)
		}
	}
	if len(found) > 1 {
		h.mu.Unlock()
		return HeartbeatInfo{}, RequestError(fmt.Sprintf("heartbeat %q: the prefix matches %d heartbeats; give more characters", id, len(found)))
	}
	if len(found) == 0 {
		h.mu.Unlock()
		where := "(see `arbor heartbeats`)"
		if session != "" {
			where = "of this session (see await heartbeat.list())"
		}
		return HeartbeatInfo{}, fmt.Errorf("%w %q %s", heartbeat.ErrNotFound, id, where)
	}
	hid := found[0]
	sb := h.sessions[h.owner[hid]]
	h.mu.Unlock()
	sb.mu.Lock()
	hb, _ := sb.store.Get(hid)
	err := sb.store.Delete(hid)
	sb.mu.Unlock()
	if err != nil {
		return HeartbeatInfo{}, fmt.Errorf("delete heartbeat %s: %w", hid, err)
	}
	h.sched.Remove(hid)
	h.mu.Lock()
	delete(h.owner, hid)
	h.mu.Unlock()
	return HeartbeatInfo{Heartbeat: hb, Pending: hb.Pending()}, nil
}

// The kernel's heartbeat.* methods: a session's code sees and changes only its own.

func hostHeartbeatCreate(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		Instruction string `json:"instruction"`
		Every       string `json:"every"`
		Cron        string `json:"cron"`
	}
	if err := decodeStrict("heartbeat.create", raw, &p); err != nil {
		return nil, err
	}
	n := 0
	if sb, err := s.svc.beats.storeOf(s); err == nil {
		n = len(sb.store.List())
	}
	if err := checkModelHeartbeat(p.Every, p.Cron, n, time.Now()); err != nil {
		return nil, err
	}
	return s.svc.beats.create(s, HeartbeatRequest{Instruction: p.Instruction, Every: p.Every, Cron: p.Cron})
}

// Model code may keep a session awake, not spin it: its heartbeats fire at most once a
// modelHeartbeatFloor, and a session's code may keep at most modelHeartbeatMax of them (the
// user's own, through the editors or the CLI, have only the scheduler's bounds).
const (
	modelHeartbeatFloor = time.Minute
	modelHeartbeatMax   = 4
)

// checkModelHeartbeat refuses a heartbeat from model code that would fire more often than
// the floor (an every below it, or a cron whose next runs come closer than it), or one past
// the count limit when the session has n already.
func checkModelHeartbeat(every, cron string, n int, now time.Time) error {
	if n >= modelHeartbeatMax {
		return RequestError(fmt.Sprintf("heartbeat: this session has %d heartbeats, the most its code may keep; delete one first (await heartbeat.delete(id))", n))
	}
	sch, err := heartbeat.Parse(every, cron, now)
	if err != nil {
		return RequestError(err.Error())
	}
	t := sch.Next(now)
	for range 50 {
		next := sch.Next(t)
		if gap := next.Sub(t); gap < modelHeartbeatFloor {
			return RequestError(fmt.Sprintf("heartbeat: it would fire every %v; a heartbeat from the session's code fires at most once every %v (the user can make faster ones)", gap, modelHeartbeatFloor))
		}
		t = next
	}
	return nil
}

func hostHeartbeatList(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	if err := decodeStrict("heartbeat.list", raw, &struct{}{}); err != nil {
		return nil, err
	}
	return s.svc.Heartbeats(s.meta.ID)
}

func hostHeartbeatDelete(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		ID string `json:"id"`
	}
	if err := decodeStrict("heartbeat.delete", raw, &p); err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, errors.New("heartbeat.delete: give the id of a heartbeat (see await heartbeat.list())")
	}
	return s.svc.beats.delete(s.meta.ID, p.ID)
}
