package agents

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/kernel"
)

// skillImport imports the module in a fresh interpreter and prints the traceback if it fails.
const skillImport = `import importlib, os, sys, traceback
sys.path.insert(0, os.getcwd())
try:
    importlib.import_module("arbor_skills." + os.environ["ARBOR_SKILL"])
except BaseException:
    traceback.print_exc()
    sys.exit(1)
`

// skillTimeout bounds the import of one skill.
const skillTimeout = 30 * time.Second

// checkSkill refuses a skill that does not import, with its traceback. The module is model
// code: it is imported the way a cell runs, in the session's sandbox, with the kernels'
// interpreter and environment rules, never in the daemon. The entry is validated first: its id
// becomes a file name.
func (s *Session) checkSkill(ctx context.Context, e harness.Entry) error {
	if e.Kind != harness.Skill {
		return nil
	}
	if err := e.Validate(); err != nil {
		return err
	}
	py := s.cfg.KernelPython
	if py == "" {
		var err error
		if py, err = kernel.FindPython(); err != nil {
			return fmt.Errorf("skill %s: cannot check that it imports: %w", e.ID, err)
		}
	}
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(s.dir, "skillcheck", hex.EncodeToString(b[:]))
	pkg := filepath.Join(dir, "arbor_skills")
	if err := os.MkdirAll(pkg, 0o700); err != nil {
		return fmt.Errorf("skill %s: %w", e.ID, err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), nil, 0o600); err != nil {
		return fmt.Errorf("skill %s: %w", e.ID, err)
	}
	if err := os.WriteFile(filepath.Join(pkg, e.ID+".py"), []byte(e.Module), 0o600); err != nil {
		return fmt.Errorf("skill %s: %w", e.ID, err)
	}
	cctx, cancel := context.WithTimeout(ctx, skillTimeout)
	defer cancel()
	cmd, release, err := s.setupCommand(cctx, dir, `exec "$ARBOR_PY" -c "$ARBOR_CHECK"`,
		[]string{"ARBOR_PY=" + py, "ARBOR_CHECK=" + skillImport, "ARBOR_SKILL=" + e.ID, "PYTHONDONTWRITEBYTECODE=1"})
	if err != nil {
		return fmt.Errorf("skill %s: cannot check that it imports: %w", e.ID, err)
	}
	defer release()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		if cctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("%w: skill %s: importing it did not finish in %s (a skill's module should only define things)", harness.ErrInvalid, e.ID, skillTimeout)
		}
		return fmt.Errorf("%w: skill %s does not import:\n%s", harness.ErrInvalid, e.ID, tail(strings.TrimSpace(out.String()), 4<<10))
	}
	return nil
}
