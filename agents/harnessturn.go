package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/sandbox"
)

// turnHarness is the harness as a turn sees it, taken at the turn's start: edits made during
// the turn (by its own cells, the user, another session) apply at the next boundary, so one
// turn's prompt never changes under it.
type turnHarness struct {
	heads  string // the scopes' head commits it was built from
	block  string // what goes after the base prompt
	skills string // hash of the skill modules written for the kernel
	// read is each scope's entries as of its head: a scope whose head did not move is not
	// read again (a 10,000-entry global store costs a turn nothing while only the session's
	// own scope changes).
	read map[harness.Scope]scopeRead
}

type scopeRead struct {
	head    string
	entries []harness.Entry // every kind, in harness.Kinds order, ids sorted
}

// loadHarness refreshes the session's harness at a turn boundary. A session pinned to harness
// versions (Meta.Harness: an eval task's) reads those commits instead of the scopes' heads. Unchanged stores (the same
// heads) reuse the block byte for byte, so an unchanged harness keeps the prompt prefix — and
// providers' prompt caches — stable. A store that cannot be read is skipped with a warning:
// a session goes on without a broken harness rather than stopping.
func (s *Session) loadHarness(ctx context.Context) {
	stores := map[harness.Scope]*harness.Store{}
	headOf := map[harness.Scope]string{}
	var heads []string
	for _, sc := range harness.Scopes {
		st, err := s.harnessStore(ctx, sc)
		if err != nil {
			s.svc.log.Warn("harness: scope unavailable; the turn goes on without it", "session", s.meta.ID, "scope", sc, "err", err)
			continue
		}
		head, pinned := s.meta.Harness[string(sc)]
		if !pinned {
			head, err = st.Head(ctx)
		}
		if err != nil {
			s.svc.log.Warn("harness: scope unreadable; the turn goes on without it", "session", s.meta.ID, "scope", sc, "err", err)
			continue
		}
		stores[sc], headOf[sc] = st, head
		heads = append(heads, string(sc)+"="+head)
	}
	key := strings.Join(heads, " ")
	s.mu.Lock()
	same := s.harness.heads == key && key != ""
	s.mu.Unlock()
	if same {
		return
	}
	s.mu.Lock()
	prev := s.harness.read
	s.mu.Unlock()
	read := map[harness.Scope]scopeRead{}
	var scopes []harness.ScopeEntries
	var skills []harness.Entry
	seen := map[string]bool{}
	for _, sc := range harness.Scopes {
		st := stores[sc]
		if st == nil {
			continue
		}
		head := headOf[sc]
		r, ok := prev[sc]
		if !ok || r.head != head {
			es, err := st.ListAllAt(ctx, head)
			if err != nil {
				s.svc.log.Warn("harness: scope unreadable; the turn goes on without it", "session", s.meta.ID, "scope", sc, "err", err)
				continue // and is read again next turn
			}
			r = scopeRead{head: head, entries: es}
		}
		read[sc] = r
		for _, e := range r.entries {
			if e.Kind == harness.Skill && !seen[e.ID] { // the narrowest scope's skill of a name wins
				seen[e.ID] = true
				skills = append(skills, e)
			}
		}
		scopes = append(scopes, harness.ScopeEntries{Scope: string(sc), Entries: r.entries})
	}
	th := turnHarness{heads: key, block: harness.Render(scopes, s.cfg.HarnessBudget), read: read}
	var err error
	if th.skills, err = s.writeSkills(skills); err != nil {
		s.svc.log.Warn("harness: write skills for the kernel", "session", s.meta.ID, "err", err)
	}
	s.mu.Lock()
	changedSkills := s.harness.skills != th.skills
	s.harness = th
	s.mu.Unlock()
	if changedSkills && s.kernel.live() {
		// Pinned per turn: modules imported in an earlier turn are dropped, so this turn's
		// import gets this turn's version.
		if k := s.kernel.current(); k != nil {
			code := "import sys as __s, importlib as __i\n" +
				"for __m in [m for m in __s.modules if m == 'arbor_skills' or m.startswith('arbor_skills.')]:\n    del __s.modules[__m]\n" +
				"__i.invalidate_caches()\ndel __s, __i"
			if r, err := k.ExecuteHidden(ctx, code); err != nil || r.Status != "ok" {
				s.svc.log.Warn("harness: reload skills", "session", s.meta.ID, "err", err, "status", statusOf(r))
			}
		}
	}
}

// skillsDir holds the package arbor_skills the kernel imports skills from. It is in the
// kernel's own state directory, the one place of the session's a sandboxed kernel can read.
func (s *Session) skillsDir() string { return filepath.Join(s.dir, "kernel", "skills") }

// writeSkills writes each skill as arbor_skills/<id>.py (its doc as the module docstring's
// companion SKILL.md stays in the store) and returns a hash of what was written.
func (s *Session) writeSkills(skills []harness.Entry) (string, error) {
	h := sha256.New()
	for _, e := range skills {
		fmt.Fprintf(h, "%s\x00%s\x00", e.ID, e.Module)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	// In the kernel's state dir, read-only to its sandbox; a link left there by an older
	// layout is refused rather than written (and removed) through.
	f, err := sandbox.OpenDir(s.dir, "kernel/skills", true)
	if err != nil {
		return "", err
	}
	f.Close()
	pkg := filepath.Join(s.skillsDir(), "arbor_skills")
	tmp := pkg + ".new"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", err
	}
	doc := "\"\"\"Skills of this session's harness, as of the current turn.\"\"\"\n"
	if err := os.WriteFile(filepath.Join(tmp, "__init__.py"), []byte(doc), 0o600); err != nil {
		return "", err
	}
	for _, e := range skills {
		// Entries come from the store, which validated them; the id becomes a file name, so
		// it is checked again here rather than trusted.
		if err := e.Validate(); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, e.ID+".py"), []byte(e.Module), 0o600); err != nil {
			return "", err
		}
	}
	os.RemoveAll(pkg)
	if err := os.Rename(tmp, pkg); err != nil {
		return "", err
	}
	return sum, nil
}
