package server

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

func dirOf(file string) string { return filepath.Dir(file) }

// readLines returns lines [start, end] (0-based, inclusive) of a file on disk.
func readLines(file string, start, end int) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var b strings.Builder
	for i := 0; sc.Scan() && i <= end; i++ {
		if i >= start {
			b.WriteString(sc.Text())
			b.WriteByte('\n')
		}
	}
	return b.String(), sc.Err()
}
