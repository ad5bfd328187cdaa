package harness

import (
	"cmp"
	"slices"
	"strings"
)

// Search returns the entries matching query, best first, at most limit of them (all when
// limit ≤ 0); an empty query matches none. The query's whitespace-separated terms are matched
// case-insensitively as substrings of an entry's id, title and body (a subagent's instructions
// standing for its body; a skill's module is code, not searched). An entry matching any term is
// a result, ranked by how many distinct terms it matches, then how many of them its title holds,
// then how many its id holds, then by kind (as in [Kinds]) and id; entries equal in all of these
// keep their input order, so the same input gives the same answer. This is what harness.<kind>.search("…")
// answers in the kernel, over a scope's entries or all that are in scope.
func Search(entries []Entry, query string, limit int) []Entry {
	terms := searchTerms(query)
	if len(terms) == 0 {
		return nil
	}
	type hit struct {
		i                 int
		all, title, ident int
	}
	var hits []hit
	for i, e := range entries {
		id, title := strings.ToLower(e.ID), strings.ToLower(e.Title)
		body := strings.ToLower(e.Body)
		if e.Kind == Subagent {
			body = strings.ToLower(e.instructions())
		}
		h := hit{i: i}
		for _, t := range terms {
			inID, inTitle := strings.Contains(id, t), strings.Contains(title, t)
			if inID || inTitle || strings.Contains(body, t) {
				h.all++
			}
			if inTitle {
				h.title++
			}
			if inID {
				h.ident++
			}
		}
		if h.all > 0 {
			hits = append(hits, h)
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		ea, eb := entries[a.i], entries[b.i]
		return cmp.Or(
			cmp.Compare(b.all, a.all),
			cmp.Compare(b.title, a.title),
			cmp.Compare(b.ident, a.ident),
			cmp.Compare(kindRank(ea.Kind), kindRank(eb.Kind)),
			cmp.Compare(ea.ID, eb.ID),
		)
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]Entry, len(hits))
	for i, h := range hits {
		out[i] = entries[h.i]
	}
	return out
}

// searchTerms is the query's distinct lower-case terms, in order.
func searchTerms(query string) []string {
	var terms []string
	for _, t := range strings.Fields(strings.ToLower(query)) {
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	}
	return terms
}
