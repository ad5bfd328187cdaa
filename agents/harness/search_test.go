package harness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func ids(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Kind) + ":" + e.ID
	}
	return out
}

// TestSearchFindsOneAmongTenThousand is the model's way to the memories the overview left out.
func TestSearchFindsOneAmongTenThousand(t *testing.T) {
	t.Parallel()
	var es []Entry
	for i := range 10000 {
		es = append(es, Entry{Kind: Memory, ID: fmt.Sprintf("m%05d", i), Title: fmt.Sprintf("Fact %d", i),
			Body: fmt.Sprintf("Fact number %d about the build and the deploy pipeline.", i)})
	}
	target := Entry{Kind: Memory, ID: "m04711", Title: "Where the deploy key lives", Body: "In the Vault, at secret/ci/deploy."}
	es[4711] = target
	r := rand.New(rand.NewPCG(7, 7))
	r.Shuffle(len(es), func(a, b int) { es[a], es[b] = es[b], es[a] })
	for _, q := range []string{"vault", "VAULT deploy key", "deploy Vault"} {
		got := Search(es, q, 5)
		if len(got) == 0 || got[0].ID != target.ID {
			t.Errorf("Search(%q) = %v, want %s first", q, ids(got), target.ID)
		}
		if len(got) > 5 {
			t.Errorf("Search(%q) gave %d results, over the limit of 5", q, len(got))
		}
	}
	if got := Search(es, "vault", 0); len(got) != 1 {
		t.Errorf("vault matches %v, want the one memory", ids(got))
	}
	if got := Search(es, "pipeline", 0); len(got) != 9999 {
		t.Errorf("no limit: %d results, want 9999", len(got))
	}
}

func TestSearchRanking(t *testing.T) {
	t.Parallel()
	es := []Entry{
		{Kind: Memory, ID: "b-body", Title: "Something", Body: "mentions lint and format"},
		{Kind: Memory, ID: "a-body", Title: "Other", Body: "mentions lint"},
		{Kind: Memory, ID: "c-title", Title: "Lint rules", Body: "none here"},
		{Kind: Note, ID: "lint", Title: "Always", Body: "run it"},
		{Kind: Subagent, ID: "linter", Title: "A role", Spec: &Spec{Instructions: "Fix LINT warnings; format too."}},
		{Kind: Skill, ID: "fmt_code", Title: "Format", Body: "formats code", Module: "lint = 1  # code is not searched"},
		{Kind: Memory, ID: "none", Title: "Unrelated", Body: "nothing"},
	}
	cases := []struct {
		query string
		want  []string
	}{
		// Two terms beat one; among two-term hits the one with a term in its title comes
		// first; then title hits, then id hits, then kind and id.
		{"lint format", []string{"subagent:linter", "memory:b-body", "memory:c-title", "skill:fmt_code", "note:lint", "memory:a-body"}},
		{"lint", []string{"memory:c-title", "note:lint", "subagent:linter", "memory:a-body", "memory:b-body"}},
		{"  ", nil},
		{"", nil},
		{"zzz", nil},
	}
	for _, c := range cases {
		got := ids(Search(es, c.query, 0))
		if !slices.Equal(got, c.want) {
			t.Errorf("Search(%q) = %v, want %v", c.query, got, c.want)
		}
		// The answer does not depend on the input's order.
		r := rand.New(rand.NewPCG(3, 3))
		for range 20 {
			sh := slices.Clone(es)
			r.Shuffle(len(sh), func(a, b int) { sh[a], sh[b] = sh[b], sh[a] })
			if again := ids(Search(sh, c.query, 0)); !slices.Equal(again, got) {
				t.Fatalf("Search(%q) on shuffled input = %v, want %v", c.query, again, got)
			}
		}
	}
	if got := ids(Search(es, "lint", 2)); !slices.Equal(got, []string{"memory:c-title", "note:lint"}) {
		t.Errorf("limit 2: %v", got)
	}
}

func BenchmarkSearch10000(b *testing.B) {
	var es []Entry
	for i := range 10000 {
		es = append(es, Entry{Kind: Memory, ID: fmt.Sprintf("m%05d", i), Title: fmt.Sprintf("Fact %d", i),
			Body: fmt.Sprintf("Fact number %d about the build and the deploy pipeline.", i)})
	}
	for b.Loop() {
		Search(es, "deploy key vault", 10)
	}
}
