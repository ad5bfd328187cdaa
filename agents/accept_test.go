package agents

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
)

const acceptScript = `{"rules":[
 {"when":{"task":"^whole","turn":1},"code":"open('whole.txt','w').write('whole\\n')"},
 {"when":{"task":"^merged","turn":1},"code":"open('merged.txt','w').write('merged\\n')"},
 {"when":{"task":"^files","turn":1},"code":"open('x.txt','w').write('x\\n')\nopen('y.txt','w').write('y\\n')"},
 {"when":{"task":"^hunks","turn":1},"code":"ls = open('long.txt').read().split('\\n')\nls[1] = 'CHANGED 2'\nls[39] = 'CHANGED 40'\nopen('long.txt','w').write('\\n'.join(ls))"},
 {"when":{"task":"^dirty","turn":1},"code":"open('main.py','w').write('print(\"agent\")\\n')"},
 {"when":{"task":"^conflict","turn":1},"code":"open('conf.txt','w').write('agent line\\n')"}
],"default":{"text":"done"}}`

func commitAll(t *testing.T, dir, msg string) {
	t.Helper()
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", msg)
}

func TestAcceptWholeFilesHunksDirtyConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, acceptScript)
	ctx := t.Context()
	var long []string
	for i := 1; i <= 50; i++ {
		long = append(long, fmt.Sprintf("line %d", i))
	}
	os.WriteFile(filepath.Join(e.repo, "long.txt"), []byte(strings.Join(long, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(e.repo, "conf.txt"), []byte("base line\n"), 0o644)
	commitAll(t, e.repo, "fixtures")

	ss := map[string]*Session{}
	for _, task := range []string{"whole", "merged", "files", "hunks", "dirty", "conflict"} {
		ss[task] = e.create(task + " task")
	}
	for _, s := range ss {
		e.settled(s)
	}
	show := func(rev string) string { return git(t, e.repo, "show", rev) }

	t.Run("whole", func(t *testing.T) {
		s := ss["whole"]
		res, err := e.svc.Accept(ctx, s.meta.ID, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := revParse(t, e.repo, "main"); got != res.Commit || res.Branch != "main" {
			t.Errorf("main at %s, accept made %s on %s", got, res.Commit, res.Branch)
		}
		msg := git(t, e.repo, "log", "-1", "--format=%B", "main")
		for _, want := range []string{"whole task", s.meta.Branch, "1 turn", "Arbor-Session: " + s.meta.ID} {
			if !strings.Contains(msg, want) {
				t.Errorf("commit message lacks %q:\n%s", want, msg)
			}
		}
		if ps := strings.Fields(git(t, e.repo, "log", "-1", "--format=%P", "main")); len(ps) != 1 {
			t.Errorf("a squash made a merge commit")
		}
		if got := show("main:whole.txt"); got != "whole\n" {
			t.Errorf("whole.txt on main = %q", got)
		}
		if got, _ := os.ReadFile(filepath.Join(e.repo, "whole.txt")); string(got) != "whole\n" {
			t.Errorf("the user's tree lacks whole.txt: %q", got)
		}
		if st := git(t, e.repo, "status", "--porcelain"); st != "" {
			t.Errorf("user's tree not clean after accept:\n%s", st)
		}
		if ev := e.events(s, event.TypeAccepted); len(ev) != 1 || ev[0]["commit"] != res.Commit || ev[0]["mode"] != "squash" {
			t.Errorf("accepted events %v", ev)
		}
	})

	t.Run("merge", func(t *testing.T) {
		s := ss["merged"]
		res, err := e.svc.Accept(ctx, s.meta.ID, nil, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		parents := strings.Fields(git(t, e.repo, "log", "-1", "--format=%P", res.Commit))
		if len(parents) != 2 || parents[1] != revParse(t, e.repo, s.meta.Branch) {
			t.Errorf("merge commit parents %v, want main's tip and %s", parents, s.meta.Branch)
		}
	})

	t.Run("files", func(t *testing.T) {
		res, err := e.svc.Accept(ctx, ss["files"].meta.ID, []string{"x.txt"}, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(res.Files, ",") != "x.txt" {
			t.Errorf("accepted files %v", res.Files)
		}
		tree := git(t, e.repo, "ls-tree", "--name-only", "main")
		if !strings.Contains(tree, "x.txt") || strings.Contains(tree, "y.txt") {
			t.Errorf("main's tree after accepting x.txt only:\n%s", tree)
		}
	})

	t.Run("hunks", func(t *testing.T) {
		s := ss["hunks"]
		d, err := e.svc.Diff(ctx, s.meta.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Files) != 1 || len(d.Files[0].Hunks) != 2 {
			t.Fatalf("hunks session diff: %+v", d.Files)
		}
		if _, err := e.svc.Accept(ctx, s.meta.ID, nil, map[string][]int{"long.txt": {1}}, false); err != nil {
			t.Fatal(err)
		}
		got := show("main:long.txt")
		if !strings.Contains(got, "CHANGED 40\n") || strings.Contains(got, "CHANGED 2\n") || !strings.Contains(got, "line 2\n") {
			t.Errorf("long.txt on main after accepting the second hunk:\n%s", got)
		}
	})

	t.Run("conflict", func(t *testing.T) {
		os.WriteFile(filepath.Join(e.repo, "conf.txt"), []byte("user line\n"), 0o644)
		commitAll(t, e.repo, "user edits conf.txt")
		head := revParse(t, e.repo, "HEAD")
		os.WriteFile(filepath.Join(e.repo, "notes.txt"), []byte("unrelated work in progress\n"), 0o644)
		before := git(t, e.repo, "status", "--porcelain")
		_, err := e.svc.Accept(ctx, ss["conflict"].meta.ID, nil, nil, false)
		var ce *gitstate.ConflictError
		if !errors.As(err, &ce) || strings.Join(ce.Files, ",") != "conf.txt" || !strings.Contains(err.Error(), "conf.txt") {
			t.Fatalf("accept over a conflicting change: %v", err)
		}
		if got := revParse(t, e.repo, "HEAD"); got != head {
			t.Errorf("HEAD moved to %s", got)
		}
		if got := git(t, e.repo, "status", "--porcelain"); got != before {
			t.Errorf("user's tree changed:\n%s\nwas\n%s", got, before)
		}
		if got, _ := os.ReadFile(filepath.Join(e.repo, "conf.txt")); string(got) != "user line\n" {
			t.Errorf("conf.txt = %q", got)
		}
		os.Remove(filepath.Join(e.repo, "notes.txt"))
	})

	t.Run("dirty", func(t *testing.T) {
		os.WriteFile(filepath.Join(e.repo, "main.py"), []byte("print('mine, uncommitted')\n"), 0o644)
		head := revParse(t, e.repo, "HEAD")
		_, err := e.svc.Accept(ctx, ss["dirty"].meta.ID, nil, nil, false)
		var de *gitstate.DirtyError
		if !errors.As(err, &de) || strings.Join(de.Files, ",") != "main.py" || !strings.Contains(err.Error(), "main.py") {
			t.Fatalf("accept into a dirty main.py: %v", err)
		}
		if got, _ := os.ReadFile(filepath.Join(e.repo, "main.py")); string(got) != "print('mine, uncommitted')\n" {
			t.Errorf("the user's main.py was overwritten: %q", got)
		}
		if got := revParse(t, e.repo, "HEAD"); got != head {
			t.Errorf("HEAD moved to %s", got)
		}
		if ev := e.events(ss["dirty"], event.TypeAccepted); len(ev) != 0 {
			t.Errorf("a refused accept recorded %v", ev)
		}
	})

	if out := git(t, e.repo, "fsck", "--no-progress"); strings.Contains(out, "error") {
		t.Errorf("git fsck:\n%s", out)
	}
}

// Accepting at the head of the diff the user reviewed takes exactly that change: a checkpoint
// made since is left on the session's branch. A head that is not the session's is refused.
func TestAcceptAtTheReviewedHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^review","turn":1},"code":"open('first.txt','w').write('reviewed\\n')"},
 {"when":{"last":"more"},"code":"open('second.txt','w').write('not reviewed\\n')"}
],"default":{"text":"done"}}`)
	ctx := t.Context()
	s := e.create("review then accept")
	e.settled(s)
	d, err := e.svc.Diff(ctx, s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(ctx, s.meta.ID, "more", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	if _, err := e.svc.AcceptAt(ctx, s.meta.ID, Review{Head: "0123456789012345678901234567890123456789"}, nil, nil, false); !errors.Is(err, ErrInvalidState) {
		t.Errorf("accept at a foreign head: %v; want ErrInvalidState", err)
	}
	res, err := e.svc.AcceptAt(ctx, s.meta.ID, Review{Head: d.Head}, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Files, ",") != "first.txt" {
		t.Errorf("accepted %v, want only first.txt (second.txt came after the review)", res.Files)
	}
	if _, err := os.Stat(filepath.Join(e.repo, "second.txt")); err == nil {
		t.Error("the unreviewed second.txt reached the user's tree")
	}
}
