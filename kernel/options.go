package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// HostHandler answers requests that Python code in a kernel sends to the daemon through the
// host bridge. The agents package implements it.
type HostHandler interface {
	// HandleHost answers one bridge request from the kernel's embedded runtime. An error becomes
	// a Python ArborError with its message.
	HandleHost(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// HostFunc adapts a function to HostHandler.
type HostFunc func(ctx context.Context, method string, params json.RawMessage) (any, error)

// HandleHost calls f.
func (f HostFunc) HandleHost(ctx context.Context, method string, params json.RawMessage) (any, error) {
	return f(ctx, method, params)
}

// Options configure one kernel.
type Options struct {
	Python   string       // interpreter; "" means FindPython()
	Dir      string       // kernel cwd (the session's worktree)
	StateDir string       // 0700 directory for the kernel's logs, runtime, skills, tmp, cache, snapshots
	Env      []string     // extra KEY=VALUE for the kernel (EnvDeny still applies)
	Host     HostHandler  // nil disables the bridge
	Restore  string       // snapshot dir to restore before the runtime boots ("" = none)
	Logger   *slog.Logger // nil discards

	// Snapshot is the directory for automatic snapshots: taken after cells (debounced by
	// SnapshotDelay) and at Close, and restored by restarts. "" disables automatic snapshots;
	// restarts then restore the last explicit [Kernel.Snapshot], or Restore.
	Snapshot      string
	SnapshotDelay time.Duration // quiet time after a cell before the automatic snapshot; 0 = 1 s
	// SnapshotFlushAge bounds what a long cell can leave unsaved: a cell that starts with the
	// automatic snapshot still pending takes it first when the last one is older than this
	// (0 = 10 s). Cells in quick succession thus pay for a snapshot at most once per
	// SnapshotFlushAge instead of before each of them.
	SnapshotFlushAge time.Duration
	// Caps on one pickled variable and on a whole snapshot, in bytes; 0 = MaxSnapshotVar,
	// MaxSnapshotTotal. Values past them are skipped, with the reason in the manifest.
	SnapshotMaxVar, SnapshotMaxTotal int64

	// Revive makes Execute start a new process, restoring the latest snapshot, when the kernel
	// died since the last cell; Result.Notice tells the model. Without it a dead kernel stays
	// dead (Execute returns ErrDead).
	Revive bool

	// EnvPass names variables the kernel inherits from the daemon beyond sandbox.AllowedEnv
	// (the user's "kernelEnv"). EnvDeny names variables it never gets, even when passed or in
	// Env: the ones holding model API keys. ARBOR_* variables are never inherited.
	EnvPass, EnvDeny []string

	// Sandbox runs the kernel under a sandbox: "" (none) or "bwrap" (bubblewrap, see package
	// sandbox: read-only system and Python environment; writable Dir, StateDir, and its own tmp
	// (at /tmp) and cache; hidden $HOME, ~/.ssh, $XDG_RUNTIME_DIR; no network unless
	// AllowNetwork). A sandboxed kernel is always launched plainly: the fork server and the
	// pool cannot give it its own mounts.
	Sandbox      string
	AllowNetwork bool
	// SandboxHome lists paths relative to $HOME a sandboxed kernel may read (~/.ssh never).
	// SandboxHide lists more directories it must not see (other sessions, the user's tree,
	// the daemon's socket dir); SandboxReadOnly directories it may read even inside hidden
	// ones (the repository's git common dir, so git works in the worktree).
	SandboxHome, SandboxHide, SandboxReadOnly []string
	// SandboxReadOnlyFiles are files a sandboxed kernel sees read-only although they lie in its
	// writable worktree (the worktree's .git file). Each is bound on itself by descriptor,
	// opened without following a symlink; a missing one is skipped, anything but a regular
	// file refused.
	SandboxReadOnlyFiles []string

	// Limits is the process and memory budget of the kernel process and all it starts (see
	// sandbox.DetectBudget for how it is enforced here); zero fields are the defaults,
	// negative ones no limit. A cell that meets it is told so in Result.Notice.
	Limits sandbox.Limits

	// InterruptGrace is how long each rung of the timeout ladder (interrupt_request, then
	// SIGINT to the process group) waits for the cell to stop before the next rung; 0 means 2 s.
	InterruptGrace time.Duration

	// Gateway runs the kernel on a Jupyter Server or Enterprise Gateway instead of as a local
	// process (see the package doc). Python, Sandbox and the fork server do not apply: the
	// gateway's kernel spec and the cluster decide them. Dir and StateDir must be visible to
	// the gateway's kernels at the same paths.
	Gateway *Gateway

	// RuntimeDir is where each kernel gets its private run dir (connection file, ZMQ and bridge
	// sockets): "" = $XDG_RUNTIME_DIR/arbor-kernels, else <temp>/arbor-<uid>/kernels. It must not
	// be a place any sandbox is given.
	RuntimeDir string

	runDir       string   // this kernel's run dir, made by Start
	sandboxBinds []string // extra read-write paths (sockets outside the run dir)
}

// Validate reports the first field that cannot work.
func (o Options) Validate() error {
	if o.Dir == "" {
		return errors.New("kernel options: Dir is empty; want the kernel's working directory")
	}
	if o.StateDir == "" {
		return errors.New("kernel options: StateDir is empty; want a private directory for kernel state")
	}
	if !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("kernel options: StateDir %q is not absolute", o.StateDir)
	}
	for _, kv := range o.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("kernel options: Env entry %q is not KEY=VALUE", kv)
		}
	}
	switch o.Sandbox {
	case "", "bwrap":
	default:
		return fmt.Errorf("kernel options: Sandbox %q is not supported; want \"\" or \"bwrap\"", o.Sandbox)
	}
	for _, rel := range o.SandboxHome {
		if err := sandbox.CheckHomeAllow(rel); err != nil {
			return fmt.Errorf("kernel options: %w", err)
		}
	}
	for _, p := range append(append([]string(nil), o.SandboxHide...), o.SandboxReadOnly...) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("kernel options: sandbox path %q is not absolute", p)
		}
	}
	if o.Snapshot != "" && !filepath.IsAbs(o.Snapshot) {
		return fmt.Errorf("kernel options: Snapshot %q is not absolute", o.Snapshot)
	}
	if o.Gateway != nil {
		if err := o.Gateway.Validate(); err != nil {
			return fmt.Errorf("kernel options: %w", err)
		}
		if o.Sandbox != "" {
			return fmt.Errorf("kernel options: Sandbox %q with a Gateway: a gateway's kernels are confined by the cluster that runs them, not by bubblewrap here", o.Sandbox)
		}
	}
	if o.InterruptGrace < 0 {
		return fmt.Errorf("kernel options: InterruptGrace %v is negative", o.InterruptGrace)
	}
	return nil
}

func (o Options) grace() time.Duration {
	if o.InterruptGrace == 0 {
		return 2 * time.Second
	}
	return o.InterruptGrace
}

func (o Options) snapshotDelay() time.Duration {
	if o.SnapshotDelay <= 0 {
		return time.Second
	}
	return o.SnapshotDelay
}

func (o Options) snapshotFlushAge() time.Duration {
	if o.SnapshotFlushAge <= 0 {
		return 10 * time.Second
	}
	return o.SnapshotFlushAge
}

// DefaultTimeout bounds a cell when ExecOptions.Timeout is 0.
const DefaultTimeout = 10 * time.Minute

// ExecOptions configure one Execute call.
type ExecOptions struct {
	Timeout  time.Duration // 0 = DefaultTimeout; then the escalation ladder
	OnOutput func(Output)  // streaming callback, may be nil; called from Execute's goroutine

	// MaxOutput bounds the output Result keeps in memory, in bytes: past it, Text keeps the
	// first and last MaxOutput/2 with a marker between, and Outputs stops growing. OnOutput
	// still sees everything (write it to disk there to keep all of it). 0 = DefaultMaxOutput;
	// negative = unbounded.
	MaxOutput int
}

// DefaultMaxOutput is the in-memory output bound of a cell when ExecOptions.MaxOutput is 0.
const DefaultMaxOutput = 64 << 20

// Output kinds.
const (
	KindStdout  = "stdout"
	KindStderr  = "stderr"
	KindResult  = "result"
	KindDisplay = "display"
	KindError   = "error"
)

// Output is one piece of cell output, in the order the kernel produced it.
type Output struct {
	Kind string                     // "stdout", "stderr", "result", "display", "error"
	Text string                     // text/plain or stream text
	Data map[string]json.RawMessage // rich MIME bundle for result/display, may be nil
}

// ExecError is the exception a cell raised. ANSI escapes are stripped.
type ExecError struct {
	Name, Value string
	Traceback   []string
}

func (e *ExecError) Error() string { return e.Name + ": " + e.Value }

// Result statuses.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusAborted = "aborted"
	StatusTimeout = "timeout"
	StatusDied    = "died"
)

// Result is the outcome of one cell.
type Result struct {
	Status         string // "ok", "error", "aborted", "timeout", "died"
	ExecutionCount int
	Text           string // everything the model should see, in order; unbounded — the caller bounds it
	Error          *ExecError
	Outputs        []Output
	Duration       time.Duration
	Notice         string // what Arbor did that the model must be told
}
