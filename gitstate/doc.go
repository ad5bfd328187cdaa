// Package gitstate keeps each agent session as git: a branch checked out in its own linked
// worktree under <git-common-dir>/arbor/worktrees, per-turn checkpoint commits, forks, diffs
// against the merge-base, and cleanup that never loses work.
//
// Call [Open] with any directory inside a repository, then [Repo.AddWorktree] (or [Repo.Fork]) to
// give a session its branch and worktree, [Repo.Checkpoint] at every turn boundary, [Repo.Diff]
// to review, and [Repo.RemoveWorktree] to clean up. The user's main working tree and index are
// never written by these calls.
//
// A [Repo] serialises every access to its repository: go-git is not safe for concurrent use of
// one repository, so all methods take the Repo's lock and may be called from many goroutines.
// Linked worktrees are written in git's own on-disk format, so the git CLI sees and uses them
// (`git worktree list`, `git -C <wt> status`), and the user may commit in them by hand.
package gitstate
