package agents

import (
	"context"
	"sync"
)

// slots caps the turns running at once in a workspace (maxRunning); a session waiting for one
// stays admitted. A session whose cell is running lends its slot to a descendant that waits
// for one: a parent polling agent_message.inbox() in a cell, with maxRunning 1, would otherwise
// keep its own children from ever starting.
type slots struct {
	mu      sync.Mutex
	max     int
	held    map[*Session]bool
	waiting map[*Session]bool
	changed chan struct{} // closed and replaced on every change
}

func newSlots(n int) *slots {
	return &slots{max: max(n, 1), held: map[*Session]bool{}, waiting: map[*Session]bool{}, changed: make(chan struct{})}
}

func (sl *slots) broadcastLocked() {
	close(sl.changed)
	sl.changed = make(chan struct{})
}

// acquire waits until s holds a slot: a free one, or one lent to it.
func (sl *slots) acquire(ctx context.Context, s *Session) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if !sl.held[s] && len(sl.held) >= sl.max {
		sl.waiting[s] = true
		sl.broadcastLocked() // once: a lender may be watching for us
		defer delete(sl.waiting, s)
	}
	for !sl.held[s] && len(sl.held) >= sl.max {
		ch := sl.changed
		sl.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			sl.mu.Lock()
			return ctx.Err()
		}
		sl.mu.Lock()
	}
	sl.held[s] = true
	return nil
}

// release gives up the slot s holds, if it holds one (it may have lent it away).
func (sl *slots) release(s *Session) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.held[s] {
		delete(sl.held, s)
		sl.broadcastLocked()
	}
}

// lendWhile runs fn (a cell of s) and, while it runs, hands s's slot to a descendant of s that
// waits for one. Afterwards s waits for a slot again before its turn goes on; if ctx ends
// first, s holds none and release is a no-op. The lender is a goroutine of its own, but fn's
// end does not wait for it: whether the slot was lent is decided under sl.mu.
func (sl *slots) lendWhile(ctx context.Context, s *Session, fn func()) {
	l := &lending{done: make(chan struct{})}
	go sl.lendTo(s, l)
	fn()
	sl.mu.Lock()
	l.over = true
	lent := l.lent
	sl.mu.Unlock()
	close(l.done)
	if lent {
		sl.acquire(ctx, s)
	}
}

// lending is one lendWhile's state: over and lent are guarded by sl.mu.
type lending struct {
	over, lent bool
	done       chan struct{} // closed once over is set
}

// lendTo waits until the cell is over or a descendant of s waits for a slot while s holds
// one, and then gives the slot to that descendant (setting l.lent).
func (sl *slots) lendTo(s *Session, l *lending) {
	for {
		sl.mu.Lock()
		if l.over {
			sl.mu.Unlock()
			return
		}
		var heir *Session
		if sl.held[s] {
			for w := range sl.waiting {
				if w.descendsFrom(s) {
					heir = w
					break
				}
			}
		}
		if heir != nil {
			delete(sl.held, s)
			sl.held[heir] = true
			l.lent = true
			sl.broadcastLocked()
			sl.mu.Unlock()
			return
		}
		ch := sl.changed
		sl.mu.Unlock()
		select {
		case <-l.done:
			return
		case <-ch:
		}
	}
}

// descendsFrom reports whether s is a child, grandchild, … of anc.
func (s *Session) descendsFrom(anc *Session) bool {
	id := s.meta.Parent
	for depth := 0; id != "" && depth < 64; depth++ {
		if id == anc.meta.ID {
			return true
		}
		p, err := s.svc.Get(id)
		if err != nil {
			return false
		}
		id = p.meta.Parent
	}
	return false
}
