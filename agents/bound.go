package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/arborhq/arbor/atomicfile"
)

// bounded is tool output cut to what enters the model's context (L1), with the full text kept
// on disk (L3) when it was cut.
type bounded struct {
	Text     string // what the model sees
	Cut      bool
	Bytes    int    // size of the full output
	Artifact string // path of the full output, when cut
}

// boundOutput keeps head and tail of out within budget bytes and a note saying what was
// dropped and where the rest is. The full output goes to dir/<sha256>.txt.
func boundOutput(out string, budget int, dir, kernelRef string) (bounded, error) {
	b := bounded{Text: out, Bytes: len(out)}
	if budget <= 0 || len(out) <= budget {
		return b, nil
	}
	sum := sha256.Sum256([]byte(out))
	name := hex.EncodeToString(sum[:]) + ".txt"
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return b, fmt.Errorf("store artifact: %w", err)
	}
	if _, err := os.Stat(path); err != nil {
		if err := writeFileAtomic(path, []byte(out)); err != nil {
			return b, fmt.Errorf("store artifact: %w", err)
		}
	}
	head := validPrefix(out[:budget*2/3])
	tail := validSuffix(out[len(out)-budget/3:])
	dropped := len(out) - len(head) - len(tail)
	lines := strings.Count(out[len(head):len(out)-len(tail)], "\n")
	b.Text = fmt.Sprintf("%s\n[… %d bytes (%d lines) omitted; the full output (%d bytes) is in the kernel as %s (slice it with code) and on disk as %s …]\n%s",
		head, dropped, lines, len(out), kernelRef, name, tail)
	b.Cut, b.Artifact = true, path
	return b, nil
}

func validPrefix(s string) string {
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func validSuffix(s string) string {
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[1:]
	}
	return s
}

// writeFileAtomic writes an artifact so that a crash leaves it whole or absent.
func writeFileAtomic(path string, data []byte) error {
	return atomicfile.WriteFile(path, data, 0o600)
}
