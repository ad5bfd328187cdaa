package heartbeat

import (
	"container/heap"
	"sync"
	"time"
)

// Tick is a heartbeat come due: Count due times from Due (the first) up to the wake-up, and
// Next, the due time the scheduler now waits for. Count is above one when the wake-up came
// late or the daemon was down.
type Tick struct {
	Due   time.Time
	Count int
	Next  time.Time
}

// Stats counts what the scheduler's goroutine did.
type Stats struct {
	// Wakeups counts the timer firing; Early those that found nothing due (a clock stepped
	// back — never a timer that fires early, and never a poll).
	Wakeups, Early int64
	// Rearms counts the goroutine waking to set its timer again because the earliest due
	// time changed (Add, Remove); Ticks the ticks reported, Fired the calls of fire.
	Rearms, Ticks, Fired int64
	// Scheduled is the number of heartbeats waiting.
	Scheduled int
}

// Scheduler waits for the due times of any number of heartbeats with one timer: a min-heap
// of next due times, and one goroutine that sleeps until the earliest. Nothing wakes it
// before then except a change of the earliest due time or Close.
type Scheduler struct {
	fire func(id string, t Tick)

	mu      sync.Mutex
	q       queue
	byID    map[string]*entry
	stats   Stats
	closed  bool
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

type entry struct {
	id   string
	sch  Schedule
	next time.Time
	i    int // index in the heap
}

// NewScheduler starts a scheduler that calls fire, on its own goroutine, for every heartbeat
// that comes due; fire must not block (hand the work to another goroutine). Close stops it.
func NewScheduler(fire func(id string, t Tick)) *Scheduler {
	s := &Scheduler{fire: fire, byID: map[string]*entry{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go s.run()
	return s
}

// Add schedules id (replacing an earlier entry of it) to come due first at next, and then
// as sch says. A next in the past fires at once, counting every due time missed.
func (s *Scheduler) Add(id string, sch Schedule, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	next = next.Round(0) // wall clock throughout: persisted and cron times have no monotonic reading
	if e, ok := s.byID[id]; ok {
		e.sch, e.next = sch, next
		heap.Fix(&s.q, e.i)
	} else {
		e := &entry{id: id, sch: sch, next: next}
		s.byID[id] = e
		heap.Push(&s.q, e)
	}
	if s.q[0].id == id {
		s.rearm()
	}
}

// Remove unschedules id; it reports whether id was scheduled.
func (s *Scheduler) Remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return false
	}
	first := e.i == 0
	heap.Remove(&s.q, e.i)
	delete(s.byID, id)
	if first {
		s.rearm() // else the timer would fire for a tick that is gone: an early wake-up
	}
	return true
}

// NextDue returns when id is next due.
func (s *Scheduler) NextDue(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return time.Time{}, false
	}
	return e.next, true
}

// Stats returns the counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Scheduled = len(s.q)
	return st
}

// Close stops the goroutine and waits for it; fire is not called after Close returns.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.stopped
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
}

func (s *Scheduler) rearm() {
	select {
	case s.kick <- struct{}{}:
	default: // one kick pending is enough: the goroutine reads the heap afresh
	}
}

func (s *Scheduler) run() {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		s.mu.Lock()
		var wait <-chan time.Time
		if len(s.q) > 0 {
			timer.Reset(max(0, time.Until(s.q[0].next)))
			wait = timer.C
		}
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-s.kick:
			timer.Stop()
			s.mu.Lock()
			s.stats.Rearms++
			s.mu.Unlock()
		case <-wait:
			s.due()
		}
	}
}

// due reports every heartbeat due now, each once with the count of its due times passed.
func (s *Scheduler) due() {
	type fired struct {
		id string
		t  Tick
	}
	var out []fired
	s.mu.Lock()
	s.stats.Wakeups++
	now := time.Now().Round(0)
	for len(s.q) > 0 && !s.q[0].next.After(now) {
		e := s.q[0]
		n, next := Count(e.sch, e.next, now)
		out = append(out, fired{e.id, Tick{Due: e.next, Count: n, Next: next}})
		if next.IsZero() { // never due again
			heap.Pop(&s.q)
			delete(s.byID, e.id)
			continue
		}
		e.next = next
		heap.Fix(&s.q, 0)
	}
	if len(out) == 0 {
		s.stats.Early++
	}
	s.mu.Unlock()
	for _, f := range out {
		select {
		case <-s.stop:
			return // closing: the owner persisted nothing of these, so they come again at start
		default:
		}
		s.fire(f.id, f.t)
		s.mu.Lock()
		s.stats.Fired++
		s.stats.Ticks += int64(f.t.Count)
		s.mu.Unlock()
	}
}

// queue is a min-heap of entries by next due time.
type queue []*entry

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].i, q[j].i = i, j
}
func (q *queue) Push(x any) {
	e := x.(*entry)
	e.i = len(*q)
	*q = append(*q, e)
}
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}
