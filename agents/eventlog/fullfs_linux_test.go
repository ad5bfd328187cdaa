package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// smallDisk mounts a tmpfs of size bytes on a fresh directory: a real disk that fills up. It
// needs root (CI runs as root); elsewhere the test is skipped, saying why.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file until the disk is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return path
		}
	}
}

// TestFullDisk: an append on a full disk fails naming the file and the cause, loses nothing
// acknowledged, leaves no partial line, and once there is room again appends go on at the next
// seq — without reopening the log.
func TestFullDisk(t *testing.T) {
	dir := smallDisk(t, "256k")
	path := filepath.Join(dir, "s", "events.jsonl")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 10; i++ {
		if _, err := l.Append(t.Context(), "ok", i); err != nil {
			t.Fatal(err)
		}
	}
	filler := fill(t, dir)
	big := strings.Repeat("x", 64<<10) // more than any slack left in the last page
	for i := 0; i < 2; i++ {
		_, err := l.Append(t.Context(), "big", big)
		if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
			t.Fatalf("append %d on a full disk: %v; want ENOSPC naming %s", i, err, path)
		}
	}
	// Write (written, not yet synced) fails the same way, at once.
	if _, err := l.Write(t.Context(), Entry{"big", big}, Entry{"started", 1}); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v; want ENOSPC", err)
	}
	if got := l.LastSeq(); got != 10 {
		t.Fatalf("LastSeq = %d after failed appends, want 10", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != l.end {
		t.Fatalf("the file holds %v bytes (err %v), want exactly the %d of the acknowledged records", fi.Size(), err, l.end)
	}
	os.Remove(filler)
	r, err := l.Append(t.Context(), "after", "room again")
	if err != nil || r.Seq != 11 {
		t.Fatalf("append after freeing space = seq %d, %v; want seq 11", r.Seq, err)
	}
	l.Close()
	l, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := l.Records(1)
	if err != nil || len(recs) != 11 || recs[10].Type != "after" {
		t.Fatalf("after reopening: %d records (%v), want 11 ending with \"after\"", len(recs), err)
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
}

// TestFullDiskConcurrent: eight writers fill the disk with the log itself. Every acknowledged
// record is in the file after reopening, seqs stay gapless, and nothing unacknowledged is.
func TestFullDiskConcurrent(t *testing.T) {
	dir := smallDisk(t, "512k")
	path := filepath.Join(dir, "events.jsonl")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[uint64]string{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			failures := 0
			for i := 0; failures < 5; i++ {
				body := fmt.Sprintf("w%d-%d-%s", w, i, strings.Repeat("y", 1500))
				r, err := l.Append(t.Context(), "rec", body)
				if err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Errorf("writer %d: %v", w, err)
						return
					}
					failures++
					continue
				}
				mu.Lock()
				acked[r.Seq] = body
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	l.Close()
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	l, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recs, err := l.Records(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(acked) {
		t.Fatalf("%d records on disk, %d acknowledged", len(recs), len(acked))
	}
	for i, r := range recs {
		var body string
		json.Unmarshal(r.Data, &body)
		if r.Seq != uint64(i+1) || acked[r.Seq] != body {
			t.Fatalf("record %d: seq %d, body %.12q…; acknowledged as %.12q…", i, r.Seq, body, acked[r.Seq])
		}
	}
}
