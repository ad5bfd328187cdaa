package agents

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/eval"
)

// The judge: what makes a hidden check's verdict say how the work is, not how the work would
// like it to look. The check runs on a clean checkout of the agent's branch in which
// everything the agent may not change is put back as the fixture had it (the check's files,
// every file its command names, test and build configuration, the task's protected globs),
// generated files are removed, and what would shadow a check module is removed and flagged.
// Python runs isolated: the standard library and installed packages before anything of the
// tree, no user site, bytecode only in a fresh cache. A check run by unittest or pytest is run
// by the judge's own runner (judge.py), whose report — with a nonce the tree never sees in its
// environment — must say tests ran and none failed: an exit code of 0 alone passes nothing a
// runner judged. A check the judge does not know passes on its exit code and, where the task
// gives one, its "pass" pattern.

//go:embed judge.py
var judgePy []byte

// judgeDir is the judge's directory inside a checkout (laid fresh: whatever the agent put
// there is removed first).
const judgeDir = ".arbor-judge"

// judgeProtected is what every check restores from the fixture besides the task's own globs:
// the configuration a test runner or build reads (hooks, addopts, targets), and what the
// interpreter runs at start.
var judgeProtected = []string{
	"**/conftest.py", "**/pytest.ini", "**/tox.ini", "**/setup.cfg", "**/pyproject.toml",
	"**/noxfile.py", "**/Makefile", "**/makefile", "**/GNUmakefile", "**/package.json",
	"**/sitecustomize.py", "**/usercustomize.py", "**/*.pth", "**/.pytest_cache/**",
}

// runnerCommand recognises a check run by a Python test runner: "python3 -m unittest …",
// "python3 -m pytest …" or "pytest …", a single command (no ; && | or redirection).
var runnerCommand = regexp.MustCompile(`^\s*(?:(python3?(?:\.\d+)?|/usr/bin/python3(?:\.\d+)?)\s+-m\s+(unittest|pytest)|(pytest))((?:\s+[^;&|<>$` + "`" + `()]*)?)\s*$`)

// scriptCommand recognises a check script run by Python: "python3 check.py ARGS", a single
// command with a relative path.
var scriptCommand = regexp.MustCompile(`^\s*(python3?(?:\.\d+)?|/usr/bin/python3(?:\.\d+)?)\s+([^\s;&|<>$` + "`" + `()/-][^\s;&|<>$` + "`" + `()]*\.py)((?:\s+[^;&|<>$` + "`" + `()]*)?)\s*$`)

// judgedCommand returns the command to run for check and the runner the judge runs it with
// ("" when the verdict is the exit code): a test runner's command is run by the judge's runner,
// a check script by the judge with the tree last on the path, anything else as written.
func judgedCommand(check string) (cmd, runner string) {
	m := runnerCommand.FindStringSubmatch(check)
	if m == nil {
		if m := scriptCommand.FindStringSubmatch(check); m != nil && !strings.HasPrefix(m[2], judgeDir+"/") {
			return m[1] + " " + judgeDir + "/judge.py script " + m[2] + strings.TrimRight(m[3], " \t\n"), ""
		}
		return check, ""
	}
	py, runner, rest := m[1], m[2], strings.TrimRight(m[4], " \t\n")
	if m[3] != "" {
		py, runner = "python3", "pytest"
	}
	return py + " " + judgeDir + "/judge.py " + runner + rest, runner
}

// judgeReport is what judge.py reports.
type judgeReport struct {
	Runner              string `json:"runner"`
	Ran                 int    `json:"ran"`
	Failures            int    `json:"failures"`
	Errors              int    `json:"errors"`
	UnexpectedSuccesses int    `json:"unexpectedSuccesses"`
	Skipped             int    `json:"skipped"`
	ExitCode            int    `json:"exitCode"`
	Passed              int    `json:"passed"`
	Failed              int    `json:"failed"`
	Exited              string `json:"exited"`
	Error               string `json:"error"`
}

// judgeVerdict decides a check from how its command ended and what it printed. It returns
// whether the check passed, what the judge read (for the record), the output without the
// judge's lines, and the flag a pass refused on the report earns ("" when none).
func judgeVerdict(res cmdResult, runner, nonce, pass string) (passed bool, how, output, flag string) {
	output = res.output
	var rep *judgeReport
	if runner != "" {
		prefix := "ARBOR-JUDGE " + nonce + " "
		var kept []string
		for l := range strings.SplitSeq(output, "\n") {
			if js, ok := strings.CutPrefix(l, prefix); ok && nonce != "" {
				var r judgeReport
				if json.Unmarshal([]byte(js), &r) == nil {
					rep = &r
				}
				continue
			}
			kept = append(kept, l)
		}
		output = strings.TrimRight(strings.Join(kept, "\n"), "\n")
	}
	if rep != nil && rep.Exited != "" {
		return false, fmt.Sprintf("code of the tree ended %s with SystemExit(%s) before it reported", runner, rep.Exited), output, eval.FlagUnproven
	}
	if !res.passed {
		return false, fmt.Sprintf("exit code %d", res.exitCode), output, ""
	}
	if runner != "" {
		switch {
		case rep == nil:
			return false, "exit code 0, but " + runner + " never reported: the process ended before the runner finished (code of the tree exited it)", output, eval.FlagUnproven
		case rep.Error != "":
			return false, "the judge could not run the check: " + rep.Error, output, ""
		case runner == "unittest" && (rep.Ran-rep.Skipped <= 0 || rep.Failures+rep.Errors+rep.UnexpectedSuccesses > 0):
			return false, fmt.Sprintf("exit code 0, but unittest reports %d run, %d skipped, %d failures, %d errors", rep.Ran, rep.Skipped, rep.Failures, rep.Errors), output, eval.FlagUnproven
		case runner == "pytest" && (rep.ExitCode != 0 || rep.Passed == 0 || rep.Failed+rep.Errors > 0):
			return false, fmt.Sprintf("exit code 0, but pytest reports %d passed, %d failed, %d errors (its exit code %d)", rep.Passed, rep.Failed, rep.Errors, rep.ExitCode), output, eval.FlagUnproven
		}
		if runner == "unittest" {
			how = fmt.Sprintf("exit code 0 and unittest's report: %d tests ran, none failed", rep.Ran-rep.Skipped)
		} else {
			how = fmt.Sprintf("exit code 0 and pytest's report: %d passed, none failed", rep.Passed)
		}
	} else {
		how = "exit code 0"
	}
	if pass != "" {
		re, err := regexp.Compile(pass)
		if err != nil {
			return false, fmt.Sprintf("the task's pass pattern %q: %v", pass, err), output, ""
		}
		if !re.MatchString(output) {
			return false, fmt.Sprintf("%s, but the output does not match the task's pass pattern %q", how, pass), output, eval.FlagUnproven
		}
		how += ", and the output matches the pass pattern"
	}
	return true, how, output, ""
}

// judgedRun is how a judged command ended: cmdResult.passed is the judge's verdict.
type judgedRun struct {
	cmdResult
	judged string   // how the judge reached it
	flags  []string // what the agent's tree earned on the way
}

// runJudged runs command as a verdict — an eval task's hidden check, a branch check, a goal's
// end condition — apart from the work it judges: on a clean checkout of head at s.dir/name
// with globs and the files the command names restored from the session's base, generated
// files and shadows of checkFiles removed (prepareJudged), lay (may be nil) laying what the
// check brings, in the sandbox with Python isolated, a unittest or pytest command run by the
// judge's runner, bounded by timeout; pass is a pattern the output must match ("" none).
func (s *Session) runJudged(ctx context.Context, name, head, command string, globs, checkFiles []string,
	lay func(dir string) error, env []string, timeout time.Duration, pass string) judgedRun {
	var r judgedRun
	dir := filepath.Join(s.dir, name)
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		r.err = err.Error()
		return r
	}
	if out, err := s.gitMain(ctx, "worktree", "add", "--detach", "--quiet", dir, head); err != nil {
		r.err = fmt.Sprintf("clean checkout of %s: %v: %s", short(head), err, out)
		return r
	}
	defer s.dropCheckout(context.WithoutCancel(ctx), dir)
	// A file the command names is restored when the session's base has it (a script the check
	// runs); one the base lacks is the work's ("test -f done.txt") and stays as the branch has it.
	var named []string
	for _, f := range commandFiles(dir, command) {
		if _, err := s.gitMain(ctx, "cat-file", "-e", s.meta.BaseCommit+":"+f); err == nil {
			named = append(named, f)
		}
	}
	flags, err := s.prepareJudged(ctx, dir, head, slices.Concat(globs, named), checkFiles)
	if err != nil {
		r.err = "prepare the checkout: " + err.Error()
		return r
	}
	if lay != nil {
		if err := lay(dir); err != nil {
			r.err = err.Error()
			return r
		}
	}
	judged, runner := judgedCommand(command)
	nonce := newNonce()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.cmdResult = s.runCommand(cctx, dir, judged, slices.Concat(judgeEnv(dir, nonce), env))
	var flag string
	r.passed, r.judged, r.output, flag = judgeVerdict(r.cmdResult, runner, nonce, pass)
	if flag != "" {
		flags = append(flags, flag)
	}
	r.flags = flags
	return r
}

// judgeEnv is the environment of a judged check: no user site, bytecode only in a fresh cache.
// The path order is the judge's (judge.py) for what it runs; a command it does not run (make,
// a shell script) keeps Python's own, so the programs it starts import as they would anywhere.
func judgeEnv(dir, nonce string) []string {
	return []string{
		"PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1",
		"PYTHONPYCACHEPREFIX=" + filepath.Join(dir, judgeDir, "pycache"),
		"ARBOR_JUDGE_NONCE=" + nonce,
	}
}

func newNonce() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// prepareJudged makes the checkout at dir (of head) what the judge runs a check on, before the
// check's own files are laid: protected paths as at the session's base, generated files gone,
// whatever would shadow a module the check brings removed, and the judge's own files laid.
// It returns the flags the agent's tree earns by it.
func (s *Session) prepareJudged(ctx context.Context, dir, head string, globs, checkFiles []string) ([]string, error) {
	var flags []string
	changed, err := s.gitMain(ctx, "diff", "--name-only", "-z", "--no-renames", s.meta.BaseCommit, head)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %v: %s", short(s.meta.BaseCommit), short(head), err, changed)
	}
	for p := range strings.SplitSeq(changed, "\x00") {
		if p != "" && protectedPath(globs, p) && !eval.IsGeneratedPath(p) {
			flags = append(flags, eval.FlagProtectedChanged)
			break
		}
	}
	if err := s.restoreProtected(ctx, dir, head, globs); err != nil {
		return nil, err
	}
	if err := removeGenerated(dir); err != nil {
		return nil, fmt.Errorf("remove generated files: %w", err)
	}
	for _, f := range checkFiles {
		stem, ok := strings.CutSuffix(f, ".py")
		if !ok {
			continue
		}
		shadows, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(stem)) + ".*")
		shadows = append(shadows, filepath.Join(dir, filepath.FromSlash(stem)))
		for _, p := range shadows {
			if _, err := os.Lstat(p); err == nil && p != filepath.Join(dir, filepath.FromSlash(f)) {
				if err := os.RemoveAll(p); err != nil {
					return nil, err
				}
				if !slices.Contains(flags, eval.FlagShadowsModule) {
					flags = append(flags, eval.FlagShadowsModule)
				}
			}
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, judgeDir)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, judgeDir, "pycache"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, judgeDir, "judge.py"), judgePy, 0o644); err != nil {
		return nil, err
	}
	return flags, nil
}

// removeGenerated removes bytecode and tools' caches under dir, never following a link.
func removeGenerated(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == dir {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		rel, _ := filepath.Rel(dir, p)
		if eval.IsGeneratedPath(filepath.ToSlash(rel)) {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
}

// commandFiles are the paths a check command names that are files of the checkout at dir:
// restored with the protected paths, so a script the check runs is the fixture's.
func commandFiles(dir, command string) []string {
	var out []string
	for _, f := range strings.Fields(command) {
		f = strings.Trim(f, `"'`)
		if strings.HasPrefix(f, "-") || filepath.IsAbs(f) || !strings.ContainsAny(f, "./") {
			continue
		}
		c := path.Clean(filepath.ToSlash(f))
		if c == "." || c == ".." || strings.HasPrefix(c, "../") {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(c))); err == nil && !fi.IsDir() {
			out = append(out, c)
		}
	}
	return out
}

// shadowedModules reports the top-level modules the agent added (paths new on its branch) that
// share a name with a module the check brings or a standard or runner module: code that would
// be imported instead of it where the tree comes first.
func shadowedModules(added, checkFiles []string) []string {
	names := map[string]bool{"pytest": true, "_pytest": true, "unittest": true, "nose": true, "nose2": true}
	for _, n := range stdlibModules {
		names[n] = true
	}
	for _, f := range checkFiles {
		if stem, ok := strings.CutSuffix(f, ".py"); ok && !strings.Contains(stem, "/") {
			names[stem] = true
		}
	}
	var out []string
	for _, p := range added {
		first, _, nested := strings.Cut(p, "/")
		name := first
		if !nested {
			stem, ok := strings.CutSuffix(first, ".py")
			if !ok {
				continue
			}
			name = stem
		}
		if names[name] && !slices.Contains(checkFiles, p) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
