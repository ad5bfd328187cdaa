package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents/event"
)

// Messaging limits: a message is at most MaxMessageBytes; a recipient holds at most
// MaxPending undelivered messages; a sender sends at most rateBurst messages at once and
// rateBurst per rateWindow on average.
const (
	MaxMessageBytes = 16 << 10
	MaxPending      = 64
	rateBurst       = 20
	rateWindow      = time.Minute
)

// rateLimiter is a token bucket per sender.
type rateLimiter struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func (r *rateLimiter) allow(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.IsZero() {
		r.tokens, r.last = rateBurst, now
	}
	r.tokens += now.Sub(r.last).Seconds() * rateBurst / rateWindow.Seconds()
	if r.tokens > rateBurst {
		r.tokens = rateBurst
	}
	r.last = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

// relation is how another session stands to s: "parent", "child" or "sibling" ("" = none).
func (s *Session) relation(o *Session) string {
	switch {
	case o.meta.ID == s.meta.Parent:
		return "parent"
	case o.meta.Parent == s.meta.ID:
		return "child"
	case o.meta.Parent != "" && o.meta.Parent == s.meta.Parent && o.meta.ID != s.meta.ID:
		return "sibling"
	}
	return ""
}

// family returns the nuclear family: parent, children, siblings.
func (s *Session) family() []*Session {
	var out []*Session
	var parent *Session
	if s.meta.Parent != "" {
		if p, err := s.svc.Get(s.meta.Parent); err == nil {
			parent = p
			out = append(out, p)
		}
	}
	for _, c := range s.childIDs() {
		if cs, err := s.svc.Get(c); err == nil {
			out = append(out, cs)
		}
	}
	if parent != nil {
		for _, c := range parent.childIDs() {
			if c == s.meta.ID {
				continue
			}
			if cs, err := s.svc.Get(c); err == nil {
				out = append(out, cs)
			}
		}
	}
	return out
}

// recipients resolves receiver_role and receiver_name within the family.
func (s *Session) recipients(role string, name *string) ([]*Session, error) {
	fam := s.family()
	var out []*Session
	if name != nil && *name != "" {
		for _, o := range fam {
			r := s.relation(o)
			if (o.meta.Name == *name || o.meta.ID == *name) && (r == role || role == "family" || (role == "parent" && r != "parent")) {
				out = append(out, o)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no %s named %q in this session's family (parent, children, siblings); see await agent_message.list_agents()", roleWord(role), *name)
		}
		return out[:1], nil
	}
	for _, o := range fam {
		if r := s.relation(o); r == role || role == "family" {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		if role == "parent" {
			return nil, errNoParent
		}
		return nil, fmt.Errorf("this session has no %s to message", roleWord(role))
	}
	return out, nil
}

func roleWord(role string) string {
	if role == "family" || role == "parent" {
		return "agent"
	}
	return role
}

func hostSend(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		Text         string  `json:"text"`
		ReceiverRole string  `json:"receiver_role"`
		ReceiverName *string `json:"receiver_name"`
		Mode         string  `json:"mode"`
	}
	if err := decodeStrict("agent_message.send", raw, &p); err != nil {
		return nil, err
	}
	switch p.ReceiverRole {
	case "":
		p.ReceiverRole = "parent"
	case "parent", "child", "sibling", "family":
	default:
		return nil, fmt.Errorf("agent_message.send: receiver_role %q: want \"parent\", \"child\", \"sibling\" or \"family\"", p.ReceiverRole)
	}
	if strings.TrimSpace(p.Text) == "" {
		return nil, fmt.Errorf("agent_message.send: the text is empty")
	}
	if len(p.Text) > MaxMessageBytes {
		return nil, fmt.Errorf("agent_message.send: the message is %d bytes, over the %d-byte limit; write long results to a file in your worktree and send its path", len(p.Text), MaxMessageBytes)
	}
	to, err := s.recipients(p.ReceiverRole, p.ReceiverName)
	if err != nil {
		return nil, fmt.Errorf("agent_message.send: %w", err)
	}
	if !s.rate.allow(time.Now()) {
		return nil, fmt.Errorf("agent_message.send: rate limit: at most %d messages per %v; batch what you have to say", rateBurst, rateWindow)
	}
	var receipts []event.Receipt
	for _, r := range to {
		status, err := r.deliverFrom(ctx, s, p.Text, p.Mode)
		if err != nil {
			return nil, fmt.Errorf("agent_message.send to %s: %w", r.label(), err)
		}
		receipts = append(receipts, event.Receipt{To: r.meta.ID, Name: r.meta.Name, Role: s.relation(r), Status: status})
		if s.relation(r) == "parent" {
			s.mu.Lock()
			s.toldParent = true
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	s.usage.Messages++
	s.mu.Unlock()
	s.append(ctx, event.MessageSent{Text: p.Text, Receipts: receipts})
	if len(receipts) == 1 {
		return receipts[0], nil
	}
	return receipts, nil
}

// deliverFrom queues a message from another agent, enforcing the pending limit.
func (s *Session) deliverFrom(ctx context.Context, from *Session, text, mode string) (string, error) {
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	if n >= MaxPending {
		return "", fmt.Errorf("%s already has %d undelivered messages (the limit); wait for it to catch up", s.label(), n)
	}
	return s.enqueue(ctx, s.relationLabel(from), text, mode)
}

// relationLabel names the sender as the recipient sees it: "parent", "child reviewer", …
func (s *Session) relationLabel(from *Session) string {
	r := s.relation(from)
	if r == "" {
		r = "agent"
	}
	if from.meta.Name != "" && r != "parent" {
		return r + " " + from.meta.Name
	}
	return r
}

func (s *Session) label() string {
	if s.meta.Name != "" {
		return fmt.Sprintf("%s (%s)", s.meta.Name, s.meta.ID[:8])
	}
	return s.meta.ID[:8]
}

func hostListAgents(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	if err := decodeStrict("agent_message.list_agents", raw, &struct{}{}); err != nil {
		return nil, err
	}
	out := []Handle{}
	for _, o := range s.family() {
		out = append(out, handleOf(s.svc.info(o), s.relation(o)))
	}
	return out, nil
}

// hostInbox hands the cell the messages waiting for this session; they count as delivered
// and will not be repeated at the next model call.
func hostInbox(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	if err := decodeStrict("agent_message.inbox", raw, &struct{}{}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	msgs := s.pending
	s.pending = nil
	s.mu.Unlock()
	out := []map[string]any{}
	for _, m := range msgs {
		s.append(ctx, event.UserMessage{Text: m.Text, From: m.From, QueuedSeq: m.Seq, Via: "inbox"})
		out = append(out, map[string]any{"from": m.From, "text": m.Text, "seq": m.Seq})
	}
	return out, nil
}
