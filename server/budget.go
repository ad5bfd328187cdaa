package server

import (
	"context"
	"sync"
)

// Per-connection bounds. jsonrpc2 calls the handler from the connection's read loop, so a
// handler that waits for room stops the daemon reading: a client that sends faster than its
// replies drain (or never reads them) is held to what is in flight, instead of growing a
// goroutine and a reply per request without bound.
const (
	defaultMaxInFlight      = 64
	defaultMaxInFlightBytes = 64 << 20 // params held by requests in flight
)

// budget counts the requests in flight on one connection and the bytes of their params.
// Only the read loop acquires; any request goroutine releases.
type budget struct {
	maxN, maxBytes int

	mu    sync.Mutex
	n     int
	bytes int
	wake  chan struct{} // signalled on every release
}

func newBudget(maxN, maxBytes int) *budget {
	return &budget{maxN: maxN, maxBytes: maxBytes, wake: make(chan struct{}, 1)}
}

// acquire waits for room for a request of size bytes. One larger than the whole byte budget
// is let through once nothing else is in flight (the framing already capped its size).
func (b *budget) acquire(ctx context.Context, size int) error {
	for {
		b.mu.Lock()
		if b.n < b.maxN && (b.n == 0 || b.bytes+size <= b.maxBytes) {
			b.n++
			b.bytes += size
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) release(size int) {
	b.mu.Lock()
	b.n--
	b.bytes -= size
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// inFlight reports the requests and bytes in flight.
func (b *budget) inFlight() (n, bytes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, b.bytes
}
