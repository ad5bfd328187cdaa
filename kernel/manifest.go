package kernel

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/arborhq/arbor/sandbox"
)

// Manifest describes a namespace snapshot, or what a restore brought back.
type Manifest struct {
	Created    string     `json:"created,omitempty"`
	Cell       int        `json:"cell,omitempty"`   // the last cell (execution count) it reflects
	Data       string     `json:"data,omitempty"`   // data file inside the snapshot dir
	Source     string     `json:"source,omitempty"` // for a restore: the snapshot dir
	Vars       []VarEntry `json:"vars"`             // saved (or restored) variables
	Skipped    []VarEntry `json:"skipped"`          // left out, each with its reason
	TotalBytes int64      `json:"total_bytes,omitempty"`
	Seconds    float64    `json:"seconds,omitempty"`
	Error      string     `json:"error,omitempty"` // a restore that failed as a whole
}

// VarEntry is one variable of a snapshot.
type VarEntry struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Method string `json:"method,omitempty"` // "pickle", "dill" or "import"
	Module string `json:"module,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	Offset int64  `json:"offset,omitempty"` // of its pickle in the data file
	Reason string `json:"reason,omitempty"` // why it was skipped
}

// Summary is one line for the model: "3/4 variables; not restored: sock (TypeError: …)". It
// names every variable left out (reasons for the first few), so the model knows exactly what
// to rebuild.
func (m *Manifest) Summary() string {
	if m == nil {
		return "no snapshot"
	}
	if m.Error != "" {
		return "could not restore the namespace: " + m.Error
	}
	n := len(m.Vars) + len(m.Skipped)
	s := fmt.Sprintf("%d/%d variables", len(m.Vars), n)
	if m.Cell > 0 {
		s += fmt.Sprintf(" as of cell %d", m.Cell)
	}
	if len(m.Skipped) > 0 {
		var parts []string
		for i, v := range m.Skipped {
			if i == 100 {
				parts = append(parts, fmt.Sprintf("and %d more", len(m.Skipped)-i))
				break
			}
			if i < 5 && v.Reason != "" {
				parts = append(parts, v.Name+" ("+v.Reason+")")
			} else {
				parts = append(parts, v.Name)
			}
		}
		s += "; not restored: " + strings.Join(parts, ", ")
	}
	return s
}

func readManifest(path string) (*Manifest, error) {
	// Written by the kernel, in a place its cell can write: never followed through a symlink.
	b, err := sandbox.ReadFileNoFollow(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode manifest %s: %w", path, err)
	}
	return &m, nil
}

func readRestoreReport(path string) (*Manifest, error) {
	m, err := readManifest(path)
	if err != nil {
		return &Manifest{Error: "no restore report from the kernel"}, err
	}
	os.Remove(path)
	return m, nil
}
