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
// goroutines. Linked worktrees, indexes and refs are written in git's own formats and with its
// lock files, so the git CLI sees and uses them (`git worktree list`, `git -C <wt> status`) and
// the user may commit, switch or delete by hand; gitstate notices and copes, or says why not.
//
// # Which repositories take which path
//
// The git CLI does three-way merges, accept's commit and the update of a checked-out worktree
// on accept, always. For the rest there are two paths, and the answer must be git's either way.
//
// The fast path is gitstate's own code on go-git's object store: a stat-trusting scan and
// partial tree rebuild for checkpoints (scan.go, treebuild.go, rawindex.go), a parallel
// checkout for new worktrees (checkout.go) and tree diffs (treediff.go). It copies bytes: a
// checkpoint of one touched file costs a fraction of `git add -A && git commit`, and a fork is
// about as fast as `git worktree add`, which is why it exists (`arbor bench git`).
//
// Copying bytes is what git does only when nothing transforms content. So a repository takes
// the CLI path, for each operation, when git would transform it:
//
//   - its config sets core.autocrlf (true or input), core.fileMode=false, core.symlinks=false or
//     core.ignoreCase=true, from any config file git reads;
//   - an attributes file sets, unsets or defines a macro over text, eol, crlf, filter, ident,
//     working-tree-encoding, diff or binary: $GIT_DIR/info/attributes, the global attributes
//     file (core.attributesFile), or a .gitattributes in any directory — tracked in the
//     worktree's index, met on disk by the checkpoint's scan, or in the tree being checked out.
//
// Other attributes (linguist-*, export-ignore, merge, whitespace) change no bytes and keep the
// fast path. core.eol and filter.* settings need such an attribute to have any effect, so the
// attribute is what is looked for; a filter named by an attribute is routed to git whether or
// not it is configured, since git, not gitstate, knows what a missing or `required` filter means.
// The config is reread when one of its files changes (their stat data is checked at each
// operation) and attributes are looked for at each operation, so a session that adds a
// .gitattributes is handled from that checkpoint on.
//
// On the CLI path a checkpoint is `git add -A` in the worktree (its own index; Setup's copies
// and nested repositories excluded by pathspec, as the scan leaves them out) and
// `git write-tree`, committed by gitstate as any checkpoint is; a new worktree is registered as
// on the fast path and filled by `git read-tree --reset -u HEAD`, the checkout `git worktree
// add` runs; the uncommitted-work check is `git status`. Diffs between commits compare stored
// blobs, which filters and eol conversion do not touch, so they stay on the fast path except
// for their binary verdicts, which come from `git diff --numstat` when the main worktree's
// attributes could change them. Checkpoints there cost what `git add -A` costs, not what changed.
//
// Differential tests (attrs_test.go) hold both paths to the git CLI on generated repositories:
// checkpoint trees against `git add -A && git write-tree`, worktrees against `git worktree add`
// byte for byte and mode for mode, diffs against `git diff`.
//
// # What runs in a worktree cannot steer git
//
// A session's worktree is written by the code the session runs, the daemon's git is not. So
// gitstate never lets git discover a repository there: every git command gets GIT_DIR (the
// worktree's admin dir, from gitstate's record of it or git's registration in the common
// dir — never from the worktree's .git file), GIT_COMMON_DIR and GIT_WORK_TREE, with
// fsmonitor, hooks, automatic maintenance and submodule recursion off (gitGuards in cli.go).
// Filter and diff drivers then come only from configuration no sandbox can write. Before
// working on a worktree, gitstate puts its .git file back to exactly what it wrote (gitfile.go),
// so the user's own git there goes where gitstate does; [Open] from inside one of its
// worktrees finds the repository the worktree lives in, whatever that file says. A checkpoint
// writes only the branch the worktree's own admin dir has checked out, by compare-and-swap, and
// refuses one another worktree has checked out or another session records as its own.
// gitstate's own scan opens every name in a worktree through its parent directory's
// descriptor without following symlinks (a .gitignore too, as git does), so a file or
// directory swapped for a link to a host file while a checkpoint runs is refused, never read
// into a commit the worktree's code could read back. git reads by path (it lstat()s, then
// opens, following a link), so while a git command reads or writes a linked worktree's files
// (the CLI checkpoint, the discard check's status, an accept's or reject's status and
// read-tree) whatever runs there is stopped: [Repo.FreezeWith] names how (agents freezes the
// session's sandbox).
//
// Checkpoints are signed "Arbor <arbor@localhost>": they are the agent's work. Accept and Merge
// commit as the user and fail up front with [ErrNoIdentity] when git has no identity for them.
package gitstate
