package workspace

import (
	"fmt"
	"strconv"
	"strings"
)

// Worktrees bounds the session worktrees a workspace keeps on disk ("worktrees"). Past a
// bound, the worktrees of the sessions inactive longest are released: checkpointed onto
// their branches and removed, and checked out again when the session is next used.
type Worktrees struct {
	// Max is how many session worktrees exist at once at most ("max"); 0 is no bound.
	Max int
	// DiskBudget is the bytes they may take together ("diskBudget": "20GB"); 0 is no bound.
	DiskBudget int64
}

// Bounded reports whether either bound is set.
func (w Worktrees) Bounded() bool { return w.Max > 0 || w.DiskBudget > 0 }

type fileWorktrees struct {
	Max        *int    `json:"max"`
	DiskBudget *string `json:"diskBudget"`
}

func (f *fileWorktrees) apply(dst *Worktrees) error {
	if f == nil {
		return nil
	}
	if f.Max != nil {
		if *f.Max < 0 {
			return fmt.Errorf("worktrees.max %d: want 0 (no bound) or more", *f.Max)
		}
		dst.Max = *f.Max
	}
	if f.DiskBudget != nil {
		n, err := ParseSize(*f.DiskBudget)
		if err != nil {
			return fmt.Errorf("worktrees.diskBudget: %w", err)
		}
		dst.DiskBudget = n
	}
	return nil
}

// ParseSize reads a size in bytes: a number with an optional unit, KB, MB, GB, TB (powers
// of 1000) or KiB, MiB, GiB, TiB (powers of 1024); "0" or "" is none.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q: want a size such as \"20GB\", \"512MiB\" or a number of bytes", s)
	}
	return int64(v * mult), nil
}

// FormatSize prints bytes for messages ("81.9 MB").
func FormatSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
