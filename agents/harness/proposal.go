package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/arborhq/arbor/atomicfile"
)

// A proposal is a change to a scope that waits for a decision: the user's (policy "review"),
// or a gate's (policy "apply"). It is two things on disk, both in the scope's git directory:
// the change as a commit on top of the scope's head when it was made, held by
// refs/arbor/proposals/<id> (so `git show` and [Store.ProposalDiff] show it as a diff, and no
// gc takes it), and a record, arbor/proposals/<id>.json, with its status. Applying commits the
// edits on the scope's current head with an Arbor-Proposal trailer and then marks the record;
// a crash between the two is found by the trailer the next time the proposal is read, so a
// proposal is applied once, never twice and never lost.

// Proposal statuses.
const (
	Pending  = "pending"
	Applied  = "applied"
	Rejected = "rejected"
)

// Edit is one entry's change in a proposal.
type Edit struct {
	Op    string `json:"op"`    // create, update or delete
	Entry Entry  `json:"entry"` // for delete, only kind and id
	Base  string `json:"base"`  // the entry's version the edit was made against ("" for create)
}

// Verdict is a gate's finding on a proposal: the command, run on a clean checkout.
type Verdict struct {
	Command    string `json:"command"`
	Commit     string `json:"commit,omitempty"` // the checkout it ran on
	Passed     bool   `json:"passed"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Output     string `json:"output,omitempty"` // its last lines
	Error      string `json:"error,omitempty"`  // why it could not run
	Judged     string `json:"judged,omitempty"` // how the judge reached the verdict
}

// Summary is the verdict in one line, as the observed effect.
func (v Verdict) Summary() string {
	at := ""
	if v.Commit != "" {
		at = " on " + short(v.Commit)
	}
	switch {
	case v.Error != "":
		return fmt.Sprintf("branch check `%s` could not run%s: %s", v.Command, at, v.Error)
	case v.TimedOut:
		return fmt.Sprintf("branch check `%s` timed out after %.1f s%s", v.Command, float64(v.DurationMs)/1000, at)
	case v.Passed:
		return fmt.Sprintf("branch check `%s` passed in %.1f s%s", v.Command, float64(v.DurationMs)/1000, at)
	}
	if v.ExitCode == 0 && v.Judged != "" {
		return fmt.Sprintf("branch check `%s` failed (%s) in %.1f s%s", v.Command, v.Judged, float64(v.DurationMs)/1000, at)
	}
	return fmt.Sprintf("branch check `%s` failed (exit %d) in %.1f s%s", v.Command, v.ExitCode, float64(v.DurationMs)/1000, at)
}

// Proposal is a proposed change to one scope and what became of it.
type Proposal struct {
	ID        string    `json:"id"`
	Scope     Scope     `json:"scope"`
	Ref       string    `json:"ref"`
	Author    string    `json:"author"` // agent or refine (or user)
	Session   string    `json:"session,omitempty"`
	Turn      int       `json:"turn,omitempty"`
	Trigger   []uint64  `json:"trigger,omitempty"`
	Rationale string    `json:"rationale,omitempty"`
	Intended  string    `json:"intended,omitempty"`
	Edits     []Edit    `json:"edits"`
	Base      string    `json:"base,omitempty"` // the scope's head it was made on
	Commit    string    `json:"commit"`         // the change as a commit on Base
	Created   time.Time `json:"created"`

	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`    // why it was rejected
	DecidedBy string    `json:"decidedBy,omitempty"` // user, policy, branch-check, eval-gate or validation
	Decided   time.Time `json:"decided,omitzero"`
	Applied   string    `json:"applied,omitempty"` // the scope's commit that applied it
	Gate      *Verdict  `json:"gate,omitempty"`
	Observed  string    `json:"observed,omitempty"`
	// Advice are what the text rules noticed in the edits (a path the checks rely on, words
	// that would skip or weaken a check): shown to whoever decides, never a refusal.
	Advice []string `json:"advice,omitempty"`
}

// Title is the proposal in a few words: its edits.
func (p Proposal) Title() string {
	var parts []string
	for _, e := range p.Edits {
		parts = append(parts, e.Op+" "+string(e.Entry.Kind)+" "+e.Entry.ID)
	}
	return strings.Join(parts, ", ")
}

// ErrDecided refuses to decide a proposal twice.
var ErrDecided = errors.New("the proposal was already decided")

// ErrNoProposal means no proposal has that id in the scope.
var ErrNoProposal = errors.New("no such proposal")

func (s *Store) proposalsDir() string { return filepath.Join(s.gitDir, "arbor", "proposals") }

func proposalRef(id string) string { return "refs/arbor/proposals/" + id }

// CheckProposalID keeps ids to what NewProposalID makes, so an id is never a path.
func CheckProposalID(id string) error {
	if len(id) < 3 || len(id) > 40 || !strings.HasPrefix(id, "p") {
		return fmt.Errorf("%w %q: a proposal id looks like p3f9a2c1d", ErrNoProposal, id)
	}
	for _, c := range id[1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%w %q: a proposal id looks like p3f9a2c1d", ErrNoProposal, id)
		}
	}
	return nil
}

// NewProposalID returns a fresh proposal id.
func NewProposalID() string {
	var b [4]byte
	rand.Read(b[:])
	return "p" + hex.EncodeToString(b[:])
}

// edits checks a proposal's edits and turns them into the store's.
func proposalEdits(es []Edit) ([]edit, error) {
	if len(es) == 0 {
		return nil, fmt.Errorf("%w: a proposal needs at least one edit", ErrInvalid)
	}
	seen := map[string]bool{}
	var out []edit
	for i, e := range es {
		k, err := ParseKind(string(e.Entry.Kind))
		if err != nil {
			return nil, fmt.Errorf("edit %d: %w", i+1, err)
		}
		key := string(k) + "/" + e.Entry.ID
		if seen[key] {
			return nil, fmt.Errorf("%w: edit %d: %s %s is edited twice", ErrInvalid, i+1, k, e.Entry.ID)
		}
		seen[key] = true
		switch e.Op {
		case "create", "update":
			if err := e.Entry.Validate(); err != nil {
				return nil, fmt.Errorf("edit %d: %w", i+1, err)
			}
			if e.Op == "update" && e.Base == "" {
				return nil, fmt.Errorf("%w: edit %d: update %s %s names no version", ErrInvalid, i+1, k, e.Entry.ID)
			}
			out = append(out, edit{k, e.Entry.ID, e.Base, e.Entry.files()})
		case "delete":
			if e.Base == "" {
				return nil, fmt.Errorf("%w: edit %d: delete %s %s names no version", ErrInvalid, i+1, k, e.Entry.ID)
			}
			if !idPattern.MatchString(e.Entry.ID) && !skillPattern.MatchString(e.Entry.ID) {
				return nil, fmt.Errorf("%w: edit %d: %q is not an entry id", ErrInvalid, i+1, e.Entry.ID)
			}
			out = append(out, edit{k, e.Entry.ID, e.Base, nil})
		default:
			return nil, fmt.Errorf("%w: edit %d: op %q: want create, update or delete", ErrInvalid, i+1, e.Op)
		}
	}
	return out, nil
}

// Propose records p (its Edits, Author and provenance set; ID may be empty) as a pending
// proposal against the scope's current head. Edits are checked as a write would be — valid
// entries, current versions — so what is pending could be applied now.
func (s *Store) Propose(ctx context.Context, p *Proposal) error {
	edits, err := proposalEdits(p.Edits)
	if err != nil {
		return err
	}
	ch := Change{Author: p.Author, Session: p.Session, Turn: p.Turn, Trigger: p.Trigger, Intended: p.Intended}
	if err := ch.Validate(); err != nil {
		return err
	}
	if p.ID == "" {
		p.ID = NewProposalID()
	} else if err := CheckProposalID(p.ID); err != nil {
		return err
	}
	head, err := s.Head(ctx)
	if err != nil {
		return err
	}
	p.Status, p.Base, p.Ref, p.Created = Pending, head, s.ref, time.Now().UTC()
	p.Scope = s.scope()
	commit, changed, err := s.build(ctx, head, edits, ch, "propose "+p.Title())
	if err != nil {
		return err
	}
	if !changed {
		return fmt.Errorf("%w: the proposal changes nothing: %s", ErrInvalid, p.Title())
	}
	p.Commit = commit
	if _, err := s.git(ctx, nil, nil, "update-ref", "-m", "arbor proposal", proposalRef(p.ID), commit, strings.Repeat("0", 40)); err != nil {
		return err
	}
	return s.saveProposal(*p)
}

// scope names the store's scope from its ref.
func (s *Store) scope() Scope {
	rest := strings.TrimPrefix(s.ref, "refs/arbor/harness/")
	sc, _, _ := strings.Cut(rest, "/")
	return Scope(sc)
}

func (s *Store) saveProposal(p Proposal) error {
	if err := os.MkdirAll(s.proposalsDir(), 0o700); err != nil {
		return fmt.Errorf("harness proposals: %w", err)
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(s.proposalsDir(), p.ID+".json"), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("harness proposal %s: %w", p.ID, err)
	}
	return nil
}

func (s *Store) loadProposal(id string) (Proposal, error) {
	if err := CheckProposalID(id); err != nil {
		return Proposal{}, err
	}
	data, err := os.ReadFile(filepath.Join(s.proposalsDir(), id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return Proposal{}, fmt.Errorf("%w %s in the %s harness", ErrNoProposal, id, s.scope())
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("harness proposal %s: %w", id, err)
	}
	var p Proposal
	if err := json.Unmarshal(data, &p); err != nil {
		return Proposal{}, fmt.Errorf("harness proposal %s: %s is damaged: %w", id, filepath.Join(s.proposalsDir(), id+".json"), err)
	}
	if p.Ref != s.ref {
		return Proposal{}, fmt.Errorf("%w %s in the %s harness (it is for %s)", ErrNoProposal, id, s.scope(), p.Ref)
	}
	return p, nil
}

// lock serialises decisions on one proposal across processes.
func (s *Store) lockProposal(id string) (unlock func(), err error) {
	if err := os.MkdirAll(s.proposalsDir(), 0o700); err != nil {
		return nil, fmt.Errorf("harness proposals: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(s.proposalsDir(), id+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("harness proposal %s: %w", id, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("harness proposal %s: lock: %w", id, err)
	}
	return func() { f.Close() }, nil
}

// Proposal returns one proposal, reconciled: a pending one whose change is already on the
// scope (the daemon stopped between committing and recording it) is recorded as applied.
func (s *Store) Proposal(ctx context.Context, id string) (Proposal, error) {
	p, err := s.loadProposal(id)
	if err != nil || p.Status != Pending {
		return p, err
	}
	unlock, err := s.lockProposal(id)
	if err != nil {
		return p, err
	}
	defer unlock()
	return s.reconcile(ctx, id)
}

// reconcile re-reads a proposal under its lock and records a found application.
func (s *Store) reconcile(ctx context.Context, id string) (Proposal, error) {
	p, err := s.loadProposal(id)
	if err != nil || p.Status != Pending {
		return p, err
	}
	c, err := s.appliedCommit(ctx, id)
	if err != nil || c == "" {
		return p, err
	}
	p.Status, p.Applied = Applied, c
	if p.Decided.IsZero() {
		p.Decided = time.Now().UTC()
	}
	if p.DecidedBy == "" {
		p.DecidedBy = "recovered"
	}
	return p, s.saveProposal(p)
}

// appliedCommit finds the scope's commit that applied proposal id, if any.
func (s *Store) appliedCommit(ctx context.Context, id string) (string, error) {
	head, err := s.Head(ctx)
	if err != nil || head == "" {
		return "", err
	}
	out, err := s.git(ctx, nil, nil, "log", "-1", "--format=%H", "--fixed-strings", "--grep="+trailerProposal+": "+id, head)
	return strings.TrimSpace(out), err
}

// Proposals lists the scope's proposals with status (all with ""), newest first.
func (s *Store) Proposals(ctx context.Context, status string) ([]Proposal, error) {
	names, err := filepath.Glob(filepath.Join(s.proposalsDir(), "p*.json"))
	if err != nil {
		return nil, err
	}
	out := []Proposal{}
	for _, n := range names {
		id := strings.TrimSuffix(filepath.Base(n), ".json")
		p, err := s.Proposal(ctx, id)
		if errors.Is(err, ErrNoProposal) {
			continue // another scope's record in a shared directory
		}
		if err != nil {
			return nil, err
		}
		if status == "" || p.Status == status {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// pending locks proposal id for a decision and returns it, reconciled; one already decided is
// refused with ErrDecided. The caller calls unlock once it has recorded its decision.
func (s *Store) pending(ctx context.Context, id string) (Proposal, func(), error) {
	unlock, err := s.lockProposal(id)
	if err != nil {
		return Proposal{}, nil, err
	}
	p, err := s.reconcile(ctx, id)
	if err == nil && p.Status != Pending {
		err = fmt.Errorf("%w: %s is %s", ErrDecided, id, p.Status)
	}
	if err != nil {
		unlock()
		return p, nil, err
	}
	return p, unlock, nil
}

// ApplyProposal commits a pending proposal's edits on the scope's current head, as one commit
// carrying its provenance, the observed effect and an Arbor-Proposal trailer, and records it
// applied. An edit whose entry changed since the proposal was made is refused with a
// *StaleError and the proposal stays pending (reject it, or propose again).
func (s *Store) ApplyProposal(ctx context.Context, id, by string, gate *Verdict, observed string) (Proposal, error) {
	p, unlock, err := s.pending(ctx, id)
	if err != nil {
		return p, err
	}
	defer unlock()
	edits, err := proposalEdits(p.Edits)
	if err != nil {
		return p, err
	}
	ch := Change{Author: p.Author, Session: p.Session, Turn: p.Turn, Trigger: p.Trigger,
		Intended: p.Intended, Observed: observed, Proposal: p.ID}
	// Who decided is recorded first, so a crash after the commit recovers it with the rest.
	p.DecidedBy = by
	if err := s.saveProposal(p); err != nil {
		return p, err
	}
	commit, err := s.commitEdits(ctx, edits, ch, "apply "+p.ID+": "+p.Title())
	if err != nil {
		p.DecidedBy = ""
		s.saveProposal(p)
		return p, err
	}
	p.Status, p.Applied, p.DecidedBy, p.Decided, p.Gate, p.Observed = Applied, commit, by, time.Now().UTC(), gate, observed
	return p, s.saveProposal(p)
}

// RejectProposal records a pending proposal as rejected, with the reason, what was observed
// ("" = the branch check's verdict, when one ran) and the branch check's verdict. Nothing of
// the scope changes.
func (s *Store) RejectProposal(ctx context.Context, id, by, reason, observed string, gate *Verdict) (Proposal, error) {
	p, unlock, err := s.pending(ctx, id)
	if err != nil {
		return p, err
	}
	defer unlock()
	p.Status, p.Reason, p.DecidedBy, p.Decided, p.Gate, p.Observed = Rejected, reason, by, time.Now().UTC(), gate, observed
	if observed == "" && gate != nil {
		p.Observed = gate.Summary()
	}
	return p, s.saveProposal(p)
}

// NoteMeasurement records on a pending proposal what was measured of it without deciding it
// (an eval gate the noise left undecided): the proposal stays pending for a person, with the
// measurement and the branch check's verdict on it.
func (s *Store) NoteMeasurement(ctx context.Context, id, observed string, gate *Verdict) (Proposal, error) {
	p, unlock, err := s.pending(ctx, id)
	if err != nil {
		return p, err
	}
	defer unlock()
	p.Observed, p.Gate = observed, gate
	return p, s.saveProposal(p)
}

// ProposalDiff is the proposal's change as `git diff` shows it: its commit against the head it
// was made on.
func (s *Store) ProposalDiff(ctx context.Context, p Proposal) (string, error) {
	from := p.Base
	if from == "" {
		from = emptyTree
	}
	return s.git(ctx, nil, nil, "diff", "--no-color", "--no-ext-diff", from, p.Commit)
}

// OpenProposal finds proposal id among those kept in gitDir (whichever scope of that object
// store it is for) and opens its scope's store.
func OpenProposal(ctx context.Context, gitDir, id string) (*Store, Proposal, error) {
	if err := CheckProposalID(id); err != nil {
		return nil, Proposal{}, err
	}
	data, err := os.ReadFile(filepath.Join(gitDir, "arbor", "proposals", id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Proposal{}, fmt.Errorf("%w %s", ErrNoProposal, id)
	}
	if err != nil {
		return nil, Proposal{}, fmt.Errorf("harness proposal %s: %w", id, err)
	}
	var head struct {
		Ref string `json:"ref"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, Proposal{}, fmt.Errorf("harness proposal %s is damaged: %w", id, err)
	}
	st, err := Open(gitDir, head.Ref)
	if err != nil {
		return nil, Proposal{}, err
	}
	p, err := st.Proposal(ctx, id)
	return st, p, err
}

// ProposalsIn lists the proposals of every scope kept in gitDir with status (all with ""),
// newest first.
func ProposalsIn(ctx context.Context, gitDir, status string) ([]Proposal, error) {
	names, err := filepath.Glob(filepath.Join(gitDir, "arbor", "proposals", "p*.json"))
	if err != nil {
		return nil, err
	}
	out := []Proposal{}
	for _, n := range names {
		_, p, err := OpenProposal(ctx, gitDir, strings.TrimSuffix(filepath.Base(n), ".json"))
		if err != nil {
			return nil, err
		}
		if status == "" || p.Status == status {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// Preview is the commit p's edits make on the scope's current head, written without moving any
// ref: the harness as applying p now would make it (what an eval gate measures). An edit whose
// entry changed since is refused with a *StaleError, as applying it would be.
func (s *Store) Preview(ctx context.Context, p Proposal) (string, error) {
	edits, err := proposalEdits(p.Edits)
	if err != nil {
		return "", err
	}
	head, err := s.Head(ctx)
	if err != nil {
		return "", err
	}
	commit, changed, err := s.build(ctx, head, edits, Change{Author: p.Author, Session: p.Session, Proposal: p.ID}, "preview "+p.ID+": "+p.Title())
	if err != nil {
		return "", err
	}
	if !changed {
		return head, nil
	}
	return commit, nil
}
