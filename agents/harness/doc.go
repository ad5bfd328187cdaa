// Package harness stores the continual harness — prompt notes (rules), memories (facts), skills
// (Python modules with a short doc) and subagent specs (roles) — as versioned, reviewable and
// reversible state: one [Store] per scope, each a history of commits on a ref of a git object
// store, so `git log -p refs/arbor/harness/workspace` shows every change with its author,
// session, turn, trigger and intended effect as trailers.
//
// Open a scope's store with [Open] (the repository's common dir for the workspace and session
// scopes; a bare repository made by [InitBare] under $XDG_DATA_HOME/arbor/harness for the global
// one), then read with [Store.Get] and [Store.List] and write with [Store.Put], [Store.Delete]
// and [Store.Rollback]:
//
//	st, err := harness.Open(commonDir, "refs/arbor/harness/workspace")
//	v, err := st.Put(ctx, harness.Entry{Kind: harness.Note, ID: "tests-first", Title: "Run the tests first",
//		Body: "Before changing code, run the tests."}, "", harness.Change{Author: "user"})
//	e, err := st.Get(ctx, harness.Note, "tests-first") // e.Version == v
//	_, err = st.Put(ctx, edited, e.Version, harness.Change{Author: "agent", Session: id, Turn: 3})
//
// Every write names the version it read ("" to create); a stale one is refused with a
// [*StaleError] naming the current version, and the ref moves by compare and swap. A rollback is
// a new commit restoring an entry as it was at a version: history is never rewritten. The work
// is the git CLI's (hash-object, update-index on a private index, write-tree, commit-tree,
// update-ref), so what the store writes is exactly what git reads.
package harness
