package agents

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/arborhq/arbor/agents/eventlog"
)

// errFound stops a log scan at the first match.
var errFound = errors.New("found")

// RequestApplied reports whether the client request with journal key key already took effect:
// with session "", whether a session was created or forked by it (its session_created carries
// the key); else whether one of that session's heartbeats or a record of its log carries it (a
// message_queued, a goal_set, or any later event whose payload has a requestKey field). The
// daemon's request journal asks this
// when it replays a request after a crash, so that a request that was applied before the crash
// is not applied again. It reads the whole log of the session: replays are rare.
func (s *Service) RequestApplied(session, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	if session == "" {
		for _, sess := range s.all() {
			if sess.meta.RequestKey == key {
				return true, nil
			}
		}
		return false, nil
	}
	sess, err := s.Get(session)
	if err != nil {
		return false, err
	}
	if hbs, err := s.Heartbeats(sess.meta.ID); err == nil {
		for _, hb := range hbs {
			if hb.RequestKey == key {
				return true, nil
			}
		}
	}
	needle := []byte(key)
	err = sess.log.Scan(0, func(r eventlog.Record) error {
		if !bytes.Contains(r.Data, needle) {
			return nil // the cheap test first: most records do not mention the key at all
		}
		var k struct {
			RequestKey string `json:"requestKey"`
		}
		if json.Unmarshal(r.Data, &k) == nil && k.RequestKey == key {
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}
