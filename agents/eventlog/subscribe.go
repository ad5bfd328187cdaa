package eventlog

import "sync"

// Subscribe returns a channel that receives every record made durable from now on, in seq order,
// and a function that ends the subscription. The channel holds up to buf records; a subscriber
// that falls further behind is dropped: its channel is closed. A closed channel thus means the log
// closed, the subscription was cancelled, or the reader fell behind; to reattach without gaps,
// Subscribe again, then call Records(last+1) and skip channel records with Seq <= the last one
// seen. Publishing never blocks appends. Subscribers share each record's Data with Append's
// caller: treat it as read-only.
func (l *Log) Subscribe(buf int) (<-chan Record, func()) {
	if buf < 1 {
		buf = 1
	}
	ch := make(chan Record, buf)
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed || !l.subs.add(ch) {
		close(ch)
		return ch, func() {}
	}
	return ch, func() { l.subs.remove(ch) }
}

type subscribers struct {
	mu     sync.Mutex
	closed bool
	set    map[chan Record]struct{}
}

func (s *subscribers) add(ch chan Record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.set == nil {
		s.set = make(map[chan Record]struct{})
	}
	s.set[ch] = struct{}{}
	return true
}

func (s *subscribers) remove(ch chan Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.set[ch]; ok {
		delete(s.set, ch)
		close(ch)
	}
}

func (s *subscribers) publish(recs []Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.set {
		for _, r := range recs {
			select {
			case ch <- r:
			default:
				// Too slow: drop it rather than hold up the log. It reattaches via Records.
				delete(s.set, ch)
				close(ch)
			}
			if _, ok := s.set[ch]; !ok {
				break
			}
		}
	}
}

func (s *subscribers) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for ch := range s.set {
		delete(s.set, ch)
		close(ch)
	}
}
