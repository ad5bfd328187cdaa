package server

// The review of a session's change on the wire: its diff (what remains, one turn's, or all of
// it) and files, accepting and rejecting parts of it, merging a child with its conflicts, and
// discarding it. Part of the protocol's one source with protocol.go and methods.go.

// DiffParams asks for a session's remaining diff (what is not accepted yet), of one turn, or
// with All its whole change against its merge-base.
type DiffParams struct {
	ID   string `json:"id"`
	Turn int    `json:"turn,omitempty"`
	All  bool   `json:"all,omitempty"`
}

// FileDiff is one file of a diff.
type FileDiff struct {
	Path      string `json:"path"`
	OldPath   string `json:"oldPath,omitempty"`
	Status    string `json:"status"` // added, modified, deleted, renamed
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
	Hunks     []Hunk `json:"hunks,omitempty"`
}

// Hunk is one hunk; Lines start with ' ', '+' or '-'.
type Hunk struct {
	OldStart int      `json:"oldStart"`
	OldLines int      `json:"oldLines"`
	NewStart int      `json:"newStart"`
	NewLines int      `json:"newLines"`
	Header   string   `json:"header,omitempty"`
	Lines    []string `json:"lines"`
}

// DiffResult is a session's change: structured files and the unified patch text. Accepted is
// set when part of the session was accepted: the remaining diff starts there (Base is it).
type DiffResult struct {
	Base     string     `json:"base"`
	Head     string     `json:"head"`
	Files    []FileDiff `json:"files"`
	Patch    string     `json:"patch"`
	Accepted string     `json:"accepted,omitempty"`
}

// FileAtParams asks for a file's content on one side of a session's diff.
type FileAtParams struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	Side string `json:"side"` // "base" or "head"
	// MaxBytes, when > 0, leaves out a larger file's content: TooLarge and Size say so.
	MaxBytes int `json:"maxBytes,omitempty"`
}

// FileAtResult carries file content; Missing is set when the file does not exist on that side.
type FileAtResult struct {
	Content  string `json:"content"`
	Missing  bool   `json:"missing,omitempty"`
	TooLarge bool   `json:"tooLarge,omitempty"` // over the request's MaxBytes: no content
	Size     int    `json:"size,omitempty"`     // the file's size, when TooLarge
}

// AcceptParams brings a session's change onto the user's current branch.
type AcceptParams struct {
	ID    string   `json:"id"`
	Files []string `json:"files,omitempty"`
	Hunks []string `json:"hunks,omitempty"` // "path#index", index into DiffResult file hunks
	Mode  string   `json:"mode,omitempty"`  // "squash" (default) or "merge"
	// Head is the head of the diff the user reviewed (DiffResult.Head): exactly that is
	// accepted, not a checkpoint made since. Empty: the session's branch as it is now.
	Head string `json:"head,omitempty"`
	// Accepted is the reviewed diff's DiffResult.Accepted ("" when it had none): refused when
	// part of the session was accepted since, as the hunk indexes would point elsewhere.
	// Absent: not checked.
	Accepted *string `json:"accepted,omitempty"`
}

// AcceptResult names the commit made on the user's branch.
type AcceptResult struct {
	Commit string   `json:"commit"`
	Files  []string `json:"files"`
}

// RejectParams takes chosen files and hunks of a session's remaining diff back: they are
// reverted on the session's branch as a new checkpoint (the user's branch is untouched) and
// the agent is told at its next turn. Nothing chosen takes back the whole remaining diff.
// Head is the DiffResult.Head reviewed; hunk indexes point into that diff.
type RejectParams struct {
	ID    string   `json:"id"`
	Files []string `json:"files,omitempty"`
	Hunks []string `json:"hunks,omitempty"` // "path#index"
	Head  string   `json:"head,omitempty"`
	// Accepted is the reviewed diff's DiffResult.Accepted, as for AcceptParams.
	Accepted *string `json:"accepted,omitempty"`
}

// RejectResult names the checkpoint that reverted the change on the session's branch.
type RejectResult struct {
	Commit string   `json:"commit"`
	Files  []string `json:"files"`
}

// MergeParams merges a child session into its parent's worktree. Resolutions and Take settle
// the conflicts arbor/session.conflicts listed, one for each file: the resolved (text)
// content, or a side taken whole — "ours" (the parent's) or "theirs" (the child's); a side
// without the file deletes it — for binary files, deletions and symlinks. ParentHead and
// ChildHead are ConflictsResult's: when set, a branch that moved since refuses the merge
// (its conflicts may be others now).
type MergeParams struct {
	ID          string            `json:"id"`
	Resolutions map[string]string `json:"resolutions,omitempty"`
	Take        map[string]string `json:"take,omitempty"`
	ParentHead  string            `json:"parentHead,omitempty"`
	ChildHead   string            `json:"childHead,omitempty"`
}

// ConflictData is the data of a CodeConflict error: Kind "conflict" (a merge could not
// reconcile Files) or "dirty" (Files have uncommitted changes in Into, which the operation
// would overwrite).
type ConflictData struct {
	Kind  string   `json:"kind"`
	Into  string   `json:"into"`
	Files []string `json:"files"`
}

// ConflictsResult lists the files merging Child into Parent conflicts in; empty when the
// merge is clean.
type ConflictsResult struct {
	Child      string         `json:"child"`
	Parent     string         `json:"parent"`
	ParentHead string         `json:"parentHead"` // the commits compared: send them back with the merge
	ChildHead  string         `json:"childHead"`
	Files      []ConflictFile `json:"files"`
}

// ConflictFile is one conflicted file in its versions: at the merge-base, in the parent
// (ours), in the child (theirs), and as git merges it, with conflict markers. A version that
// does not exist is "" with its Missing flag; Binary files are not shown (resolve them whole).
type ConflictFile struct {
	Path          string `json:"path"`
	Base          string `json:"base"`
	Ours          string `json:"ours"`
	Theirs        string `json:"theirs"`
	Merged        string `json:"merged"`
	BaseMissing   bool   `json:"baseMissing,omitempty"`
	OursMissing   bool   `json:"oursMissing,omitempty"`
	TheirsMissing bool   `json:"theirsMissing,omitempty"`
	Binary        bool   `json:"binary,omitempty"`
}

// DiscardParams removes a session's worktree; Force also drops unmerged work.
type DiscardParams struct {
	ID    string `json:"id"`
	Force bool   `json:"force,omitempty"`
}

// DiscardResult says where a discarded session's work went: its branch is deleted when
// another branch holds its commits, else kept under Archived (refs/arbor/archive/…) unless
// the discard was forced.
type DiscardResult struct {
	Session         Session `json:"session"`
	WorktreeRemoved bool    `json:"worktreeRemoved"`
	BranchDeleted   bool    `json:"branchDeleted"`
	Archived        string  `json:"archived,omitempty"`
}
