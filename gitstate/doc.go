// Package gitstate keeps each agent session as git: a branch checked out in its own linked
// worktree under <git-common-dir>/arbor/worktrees, per-turn checkpoint commits, forks, diffs
// against the merge-base, accepting work onto the user's branch, and cleanup that never loses
// work.
//
// Call [Open] with any directory inside a repository, then:
//
//   - [Repo.AddWorktree] (or [Repo.Fork] at a checkpoint) gives a session its branch and
//     worktree, and [Repo.SetupWorktree] copies in what a checkout lacks and runs a setup command;
//   - [Repo.Checkpoint] at every turn boundary commits what changed, costing what changed when
//     the caller passes the touched paths;
//   - [Repo.Diff] (against the merge-base), [Repo.DiffCommits] (one turn), [Repo.FileAt] and
//     [Diff.Unified] serve review;
//   - [Repo.Accept] brings a whole session, some files or some hunks onto the user's branch,
//     and [Repo.Merge] a child session into its parent's worktree;
//   - [Repo.Discard] removes a session, archiving unmerged work under refs/arbor/archive/, and
//     [Repo.Reconcile] repairs worktrees at daemon start.
//
// The user's main working tree and index are only ever written by Accept, and then only the
// way a fast-forward would (refusing over uncommitted changes in the files involved).
//
// A [Repo] serialises every access to its repository: go-git is not safe for concurrent use of
// one repository, so every method takes the Repo's lock and a Repo may be shared by many
// goroutines. go-git does the reading and writing of objects, trees, commits and worktrees;
// the git CLI is used only for three-way merges and for updating a checked-out worktree on
// accept. Linked worktrees, indexes and refs are written in git's own formats and with its lock
// files, so the git CLI sees and uses them (`git worktree list`, `git -C <wt> status`) and the
// user may commit, switch or delete by hand; gitstate notices and copes, or says why not.
package gitstate
