package gitbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Generate makes a repository of n text files (about 1–3 KB each, in folders three levels deep)
// at dir: one commit on branch main, written as a pack by `git fast-import` (as a clone would
// be) and checked out.
func Generate(ctx context.Context, dir string, n int) error {
	if _, err := runGit(ctx, dir, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "git", "fast-import", "--quiet", "--done")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git fast-import: %w", err)
	}
	werr := writeImport(in, n)
	in.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git fast-import: %w\n%s", err, stderr.String())
	}
	if werr != nil {
		return fmt.Errorf("git fast-import: %w", werr)
	}
	_, err = runGit(ctx, dir, "reset", "-q", "--hard")
	return err
}

// Fixture returns a repository of n generated files under cache, generating it on the first
// call and reusing it after, so the figures of one run share one tree. Callers that change the
// repository take a copy of it (see [Clone]).
func Fixture(ctx context.Context, cache string, n int) (string, error) {
	dir := filepath.Join(cache, fmt.Sprintf("fixture-%d", n))
	done := filepath.Join(dir, ".git", "arbor-fixture-complete")
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	os.RemoveAll(dir) // a half-made one from an interrupted run
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := Generate(ctx, dir, n); err != nil {
		return "", fmt.Errorf("generate %d files: %w", n, err)
	}
	return dir, os.WriteFile(done, nil, 0o644)
}

// Clone makes a repository at dir from the fixture at src: objects hard-linked, files
// checked out by git.
func Clone(ctx context.Context, src, dir string) error {
	_, err := runGit(ctx, "", "clone", "-q", "--local", src, dir)
	return err
}

// FilePath is the path of the i-th generated file.
func FilePath(i int) string {
	return fmt.Sprintf("pkg%02d/mod%02d/file%05d.go", i%20, (i/20)%10, i)
}

func writeImport(w io.Writer, n int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	var b strings.Builder
	for i := range n {
		b.Reset()
		fmt.Fprintf(&b, "package mod\n\n// File %d.\n", i)
		for j := range 20 + rng.IntN(60) {
			fmt.Fprintf(&b, "func f%d_%d(x int) int { return x*%d + %d }\n", i, j, rng.IntN(1000), rng.IntN(1000))
		}
		fmt.Fprintf(bw, "blob\nmark :%d\ndata %d\n%s\n", i+1, b.Len(), b.String())
	}
	msg := "generated\n"
	fmt.Fprintf(bw, "commit refs/heads/main\ncommitter bench <bench@localhost> 1700000000 +0000\ndata %d\n%s", len(msg), msg)
	for i := range n {
		fmt.Fprintf(bw, "M 100644 :%d %s\n", i+1, FilePath(i))
	}
	fmt.Fprintf(bw, "\ndone\n")
	return bw.Flush()
}

// gitEnv makes the CLI runs independent of the user's configuration.
var gitEnv = []string{"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}

func runGit(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
