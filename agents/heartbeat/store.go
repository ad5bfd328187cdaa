package heartbeat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/arborhq/arbor/atomicfile"
)

// Heartbeat is one heartbeat as persisted: what it says, when it is due, and its run
// counters. Runs 1..Ticks have come due; 1..Delivered are delivered; Claimed (when above
// Delivered) is a run whose delivery was claimed but is not yet known to have been made —
// after a crash its session's log decides (a message_queued carrying the run means it was).
type Heartbeat struct {
	ID          string    `json:"id"`
	Session     string    `json:"session"`
	Instruction string    `json:"instruction"`
	Every       string    `json:"every,omitempty"`
	Cron        string    `json:"cron,omitempty"`
	Created     time.Time `json:"created"`
	// Next is the due time of the first tick not yet counted.
	Next         time.Time `json:"next"`
	Ticks        int       `json:"ticks"`
	Delivered    int       `json:"delivered"`
	Claimed      int       `json:"claimed,omitempty"`
	ClaimedCount int       `json:"claimedCount,omitempty"` // the runs the claimed delivery stands for
	// RequestKey is the journal key of the client request that created it: a replay after a
	// crash finds it and makes no second heartbeat.
	RequestKey string `json:"requestKey,omitempty"`
}

// Schedule parses the heartbeat's own schedule.
func (h Heartbeat) Schedule() (Schedule, error) { return Parse(h.Every, h.Cron, h.Created) }

// Pending is the count of runs due but neither delivered nor claimed.
func (h Heartbeat) Pending() int { return h.Ticks - max(h.Delivered, h.Claimed) }

// Describe is the schedule as a user wrote it: "every 10m" or "cron */15 * * * *".
func (h Heartbeat) Describe() string {
	if h.Cron != "" {
		return "cron " + h.Cron
	}
	return "every " + h.Every
}

// ErrNotFound means no heartbeat has the id.
var ErrNotFound = errors.New("unknown heartbeat")

// Store is the heartbeats of one session, in one JSON file rewritten whole on every change
// (temp, fsync, rename, fsync of the directory): a crash leaves the old set or the new, and a
// change is durable when Put or Delete returns. It is safe for concurrent use.
type Store struct {
	path string
	mu   sync.Mutex
	hbs  map[string]Heartbeat
}

type file struct {
	Version    int         `json:"version"`
	Heartbeats []Heartbeat `json:"heartbeats"`
}

// Open reads the store at path; a missing file is an empty store.
func Open(path string) (*Store, error) {
	st := &Store{path: path, hbs: map[string]Heartbeat{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read heartbeats %s: %w", path, err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("read heartbeats %s: %w", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("read heartbeats %s: version %d, this Arbor reads version 1", path, f.Version)
	}
	for _, h := range f.Heartbeats {
		st.hbs[h.ID] = h
	}
	return st, nil
}

// Path is the store's file.
func (st *Store) Path() string { return st.path }

// List returns the heartbeats by id.
func (st *Store) List() []Heartbeat {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.listLocked()
}

func (st *Store) listLocked() []Heartbeat {
	out := make([]Heartbeat, 0, len(st.hbs))
	for _, h := range st.hbs {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Get returns the heartbeat id.
func (st *Store) Get(id string) (Heartbeat, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	h, ok := st.hbs[id]
	return h, ok
}

// Put adds or replaces h durably; on error the store is as it was.
func (st *Store) Put(h Heartbeat) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, had := st.hbs[h.ID]
	st.hbs[h.ID] = h
	if err := st.writeLocked(); err != nil {
		if had {
			st.hbs[h.ID] = old
		} else {
			delete(st.hbs, h.ID)
		}
		return err
	}
	return nil
}

// Update applies f to the heartbeat id and writes the result, as one step with respect to
// other changes of the store; f reporting false writes nothing.
func (st *Store) Update(id string, f func(*Heartbeat) bool) (Heartbeat, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, ok := st.hbs[id]
	if !ok {
		return Heartbeat{}, fmt.Errorf("%w %q", ErrNotFound, id)
	}
	h := old
	if !f(&h) {
		return old, nil
	}
	st.hbs[id] = h
	if err := st.writeLocked(); err != nil {
		st.hbs[id] = old
		return old, err
	}
	return h, nil
}

// Delete removes the heartbeat id durably.
func (st *Store) Delete(id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, ok := st.hbs[id]
	if !ok {
		return fmt.Errorf("%w %q", ErrNotFound, id)
	}
	delete(st.hbs, id)
	if err := st.writeLocked(); err != nil {
		st.hbs[id] = old
		return err
	}
	return nil
}

func (st *Store) writeLocked() error {
	f := file{Version: 1, Heartbeats: st.listLocked()}
	return atomicfile.Write(st.path, 0o600, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(f)
	})
}
