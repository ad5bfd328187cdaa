package gitstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/arborhq/arbor/atomicfile"
)

// record is what gitstate remembers about a worktree it made, in
// <common>/arbor/gitstate/<name>.json. It marks the worktree as Arbor's (Reconcile never touches
// the user's own linked worktrees) and keeps the branch name, so a vanished worktree can be
// recreated and an orphaned one cleaned up without losing its branch.
type record struct {
	Name   string `json:"name"`
	Branch string `json:"branch"`
	Dir    string `json:"dir"`
	Base   string `json:"base"`
	// Exclude lists paths Setup copied or linked in: never part of a checkpoint.
	Exclude []string `json:"exclude,omitempty"`
	// Released marks a worktree ReleaseWorktree removed to free its disk: the branch holds
	// all of its work, and RestoreWorktree brings it back.
	Released bool `json:"released,omitempty"`
}

func (r *Repo) recordDir() string { return filepath.Join(r.common, "arbor", "gitstate") }

func (r *Repo) recordPath(name string) string {
	return filepath.Join(r.recordDir(), name+".json")
}

// writeRecord stores rec atomically (temp file, rename). It does not fsync: a record lost to a
// power cut leaves a worktree that Reconcile still recognises by its place under
// <common>/arbor/worktrees, and a fork should not wait on the disk.
func (r *Repo) writeRecord(rec record) error {
	if err := os.MkdirAll(r.recordDir(), 0o777); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// Not synced: a record lost in a crash is rebuilt by Reconcile from the worktree itself.
	if err := atomicfile.WriteFileNoSync(r.recordPath(rec.Name), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write worktree record %s: %w", rec.Name, err)
	}
	return nil
}

func (r *Repo) readRecord(name string) (record, error) {
	var rec record
	b, err := os.ReadFile(r.recordPath(name))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("worktree record %s: %w", r.recordPath(name), err)
	}
	return rec, nil
}

func (r *Repo) records() ([]record, error) {
	ents, err := os.ReadDir(r.recordDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []record
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		rec, err := r.readRecord(name)
		if err != nil {
			r.logger.Warn("skipping unreadable worktree record", "name", name, "err", err)
			continue
		}
		out = append(out, rec)
	}
	return out, nil
}

func (r *Repo) removeRecord(name string) {
	if err := os.Remove(r.recordPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.logger.Warn("remove worktree record", "name", name, "err", err)
	}
}
