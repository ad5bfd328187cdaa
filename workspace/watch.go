package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher records which paths under a directory tree changed, so a checkpoint can cost what a
// turn touched instead of a scan of the whole tree. fsnotify watches directories, not trees:
// the watcher adds every directory it finds, and new ones as they appear.
//
// Call [Watch], then [Watcher.Take] at each turn boundary. When the kernel's event queue
// overflowed, a watch could not be added, or the watcher failed, Take reports complete=false
// and the caller falls back to a full scan — the watcher is an optimisation, never the truth.
type Watcher struct {
	root string
	w    *fsnotify.Watcher
	log  *slog.Logger
	done chan struct{}

	mu       sync.Mutex
	changed  map[string]bool
	complete bool // false after an overflow or a missed directory, until the next Take
	marks    map[string]chan struct{}
	seq      int
	dirs     map[string]bool // directories watched, by path when added
	stale    bool            // a watched directory was moved or removed: watches under it name old paths
}

// markPrefix names the files Sync writes to learn that earlier events have been read.
const markPrefix = ".arbor-sync-"

// Watch starts watching root (recursively, skipping .git).
func Watch(root string, log *slog.Logger) (*Watcher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	w := &Watcher{root: root, w: fw, log: log, done: make(chan struct{}), changed: map[string]bool{}, complete: true, marks: map[string]chan struct{}{}, dirs: map[string]bool{}}
	if err := w.addTree(root); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	go w.loop()
	return w, nil
}

func (w *Watcher) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err := w.w.Add(p); err != nil {
			return err
		}
		w.mu.Lock()
		w.dirs[p] = true
		w.mu.Unlock()
		return nil
	})
}

func (w *Watcher) loop() {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			w.event(ev)
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			w.log.Debug("watcher error; next checkpoint scans everything", "root", w.root, "err", err)
			w.mu.Lock()
			w.complete = false
			w.mu.Unlock()
		}
	}
}

func (w *Watcher) event(ev fsnotify.Event) {
	rel, err := filepath.Rel(w.root, ev.Name)
	if err != nil || rel == "." || rel == ".git" || strings.HasPrefix(rel, ".git"+string(filepath.Separator)) {
		return
	}
	if strings.HasPrefix(rel, markPrefix) {
		w.mu.Lock()
		if ch, ok := w.marks[rel]; ok {
			close(ch)
			delete(w.marks, rel)
		}
		w.mu.Unlock()
		return
	}
	if ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove) {
		w.mu.Lock()
		if w.dirs[ev.Name] {
			// inotify watches follow the inode: after a directory moves, the watches below it
			// report its old paths. Only a new watcher (and a full scan) is right again.
			w.stale = true
		}
		w.mu.Unlock()
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			// A new directory: watch it and everything already inside it (files may have
			// landed before the watch did), and count the whole directory as touched.
			if err := w.addTree(ev.Name); err != nil {
				w.mu.Lock()
				w.complete = false
				w.mu.Unlock()
			}
		}
	}
	w.mu.Lock()
	w.changed[rel] = true
	w.mu.Unlock()
}

// Sync waits until every change made before it was called has been recorded: inotify keeps
// order, so once the event for a marker file written now is read, so are all earlier ones.
// Past the timeout the record is marked incomplete.
func (w *Watcher) Sync(timeout time.Duration) {
	w.mu.Lock()
	w.seq++
	name := fmt.Sprintf("%s%d-%d", markPrefix, os.Getpid(), w.seq)
	ch := make(chan struct{})
	w.marks[name] = ch
	w.mu.Unlock()
	path := filepath.Join(w.root, name)
	err := os.WriteFile(path, nil, 0o600)
	os.Remove(path)
	if err == nil {
		select {
		case <-ch:
			return
		case <-time.After(timeout):
		}
	}
	w.mu.Lock()
	delete(w.marks, name)
	w.complete = false
	w.mu.Unlock()
}

// Take returns the paths (relative to the root, files or directories) changed since the last
// Take, and whether that list is complete. It resets the record.
func (w *Watcher) Take() (paths []string, complete bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.changed {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	complete = w.complete && !w.stale
	w.changed = map[string]bool{}
	w.complete = true
	return paths, complete
}

// Stale reports that a watched directory was moved or removed: the watcher's paths may be
// wrong from now on, and Take always reports an incomplete record. Replace the watcher.
func (w *Watcher) Stale() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stale
}

// Close stops watching.
func (w *Watcher) Close() error {
	err := w.w.Close()
	<-w.done
	return err
}
