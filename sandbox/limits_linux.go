package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var detected struct {
	once sync.Once
	b    *Budget
}

// DetectBudget decides once per process how this machine enforces [Limits] (see limits.go),
// creates the daemon's own cgroups (arbor.<ns>.<pid>) and removes those a killed daemon left.
// Later calls return the first answer.
func DetectBudget() *Budget {
	detected.once.Do(func() { detected.b = detectBudget() })
	return detected.b
}

func detectBudget() *Budget {
	f := facts{uid: os.Getuid()}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	f.mounts = parseMountinfo(mi)
	cg, _ := os.ReadFile("/proc/self/cgroup")
	f.v1, f.v2, f.has2 = parseProcCgroup(cg)
	f.prlimit, _ = exec.LookPath("prlimit")
	own := ownName(os.Getpid())
	if m, ok := findMount(f.mounts, true, ""); ok && f.has2 {
		dir := joinCgroup(m, f.v2)
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil {
			f.v2Controllers = strings.Fields(string(b))
		}
		if contains(f.v2Controllers, "pids") || contains(f.v2Controllers, "memory") {
			f.v2Delegable = delegate2(dir, dir == m.dir, own, f.v2Controllers)
		}
		if f.v2Delegable != nil && f.uid == 0 && dir != m.dir {
			// Root may make its cgroups at the hierarchy's root, where processes and
			// controllers can live side by side.
			b, _ := os.ReadFile(filepath.Join(m.dir, "cgroup.controllers"))
			if ctrls := strings.Fields(string(b)); delegate2(m.dir, true, own, ctrls) == nil {
				f.v2Controllers, f.v2Delegable, f.v2Parent = ctrls, nil, m.dir
			}
		}
	}
	f.writable = func(dir string) error {
		cleanLeftovers(dir)
		err := os.Mkdir(filepath.Join(dir, own), 0o755)
		if err == nil || errors.Is(err, os.ErrExist) {
			return nil
		}
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("not writable by uid %d (not delegated to the daemon)", f.uid)
		}
		return err
	}
	pids, mem := plan(f)
	b := &Budget{Pids: pids.mech, Memory: mem.mech, prlimit: f.prlimit, total: memTotal(f)}
	var why []string
	for _, c := range []choice{pids, mem} {
		if c.why != "" && !contains(why, c.why) {
			why = append(why, c.why)
		}
	}
	b.Reason = strings.Join(why, "; ")
	if pids.mech == MechCgroup1 || pids.mech == MechCgroup2 {
		b.pidsParent = filepath.Join(pids.parent, own)
	}
	if mem.mech == MechCgroup1 || mem.mech == MechCgroup2 {
		b.memParent = filepath.Join(mem.parent, own)
	}
	b.freezerParent = freezerParent(f, b, own)
	return b
}

// delegate2 makes the daemon's v2 cgroup dir a parent of cgroups with pids and memory
// enabled. A v2 cgroup with processes cannot enable controllers for its children, so the
// daemon moves itself into a leaf (dir/arbor.daemon) first — what systemd asks of a service
// with Delegate=yes. It does so only when it is alone in dir: moving the processes of a
// terminal's session is not the daemon's to do.
func delegate2(dir string, root bool, own string, avail []string) error {
	var enable []string
	for _, c := range []string{"pids", "memory"} {
		if contains(avail, c) {
			enable = append(enable, "+"+c)
		}
	}
	ctl := strings.Join(enable, " ")
	if !root {
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("not readable: %v", err)
		}
		me := strconv.Itoa(os.Getpid())
		for _, p := range strings.Fields(string(procs)) {
			if p != me {
				return errors.New("shared with other processes, so not delegated to the daemon; start it in a cgroup of its own, e.g. systemd-run --user --scope -p Delegate=yes arbor daemon")
			}
		}
		leaf := filepath.Join(dir, "arbor.daemon")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("not delegated to the daemon: %v", err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(me), 0); err != nil {
			return fmt.Errorf("not delegated to the daemon: move into %s: %v", leaf, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(ctl), 0); err != nil {
		return fmt.Errorf("enable %s: %v", ctl, err)
	}
	cleanLeftovers(dir)
	mine := filepath.Join(dir, own)
	if err := os.Mkdir(mine, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %v", mine, err)
	}
	if err := os.WriteFile(filepath.Join(mine, "cgroup.subtree_control"), []byte(ctl), 0); err != nil {
		return fmt.Errorf("enable %s in %s: %v", ctl, mine, err)
	}
	return nil
}

// ownName names a daemon's cgroups by its pid and its pid namespace (arbor.<ns>.<pid>): a pid
// means nothing to a daemon in another namespace, whose cgroups are never taken for a dead
// one's.
func ownName(pid int) string {
	var st syscall.Stat_t
	syscall.Stat("/proc/self/ns/pid", &st)
	return fmt.Sprintf("arbor.%d.%d", st.Ino, pid)
}

// cleanLeftovers removes the cgroups in dir of daemons of this pid namespace that no longer
// run, and kills what still runs in them: kernels that outlived a killed daemon.
func cleanLeftovers(dir string) {
	prefix := strings.TrimSuffix(ownName(0), ".0")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), prefix+".")
		pid, err := strconv.Atoi(n)
		if !ok || err != nil || pid <= 0 || !e.IsDir() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		d := filepath.Join(dir, e.Name())
		kids, _ := os.ReadDir(d)
		for _, k := range kids {
			if k.IsDir() {
				removeCgroup(filepath.Join(d, k.Name()), time.Second)
			}
		}
		removeCgroup(d, time.Second)
	}
}

// removeCgroup kills the members of cgroup dir and removes it, waiting up to wait for them to
// exit (rmdir fails while a member is still being torn down).
func removeCgroup(dir string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Rmdir(dir)
		if errors.Is(err, syscall.EBUSY) {
			// A frozen v1 freezer's members die of SIGKILL only once thawed.
			os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0)
		}
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memTotal is the memory the daemon may use: MemTotal, or its own memory cgroup's limit when
// lower.
func memTotal(f facts) int64 {
	total := PhysicalMemory()
	limit := func(path string) {
		if b, err := os.ReadFile(path); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
				total = n
			}
		}
	}
	if m, ok := findMount(f.mounts, false, "memory"); ok {
		if p, ok := f.v1["memory"]; ok {
			limit(filepath.Join(joinCgroup(m, p), "memory.limit_in_bytes"))
		}
	}
	if m, ok := findMount(f.mounts, true, ""); ok && f.has2 {
		limit(filepath.Join(joinCgroup(m, f.v2), "memory.max")) // "max" does not parse: no limit
	}
	return total
}

// Close removes the daemon's own cgroups (arbor.<ns>.<pid>) once its process trees have ended
// and their groups were removed; what is still in use stays, for the next start to remove.
func (b *Budget) Close() {
	for _, d := range []string{b.pidsParent, b.memParent, b.freezerParent} {
		if d != "" {
			syscall.Rmdir(d)
		}
	}
}

// Group is the budget of one process tree: its cgroups, or the rlimits to set inside its
// sandbox. Call [Budget.NewGroup] before starting the process, [Group.Apply] on its
// exec.Cmd (or [Group.Outer], [Group.Inner] and [Group.CgroupFD] to build it by hand), and
// [Group.Remove] once it has ended.
type Group struct {
	b       *Budget
	Limits  Limits   // resolved: no zero fields
	join    []string // v1 cgroup.procs files the process writes itself into before exec
	v2      string   // the v2 cgroup it is cloned into
	fd      int      // open on v2, or -1
	pidsDir string
	memDir  string
	memV1   bool
	// freeze is the cgroup Freeze freezes ("": signals instead): the v2 cgroup, or the v1
	// freezer's (freezeV1).
	freeze   string
	freezeV1 bool
	dirs     []string // every cgroup made, to remove
}

// NewGroup makes the cgroups of one process tree, name unique among the daemon's, with
// limits l (zero fields: the defaults).
func (b *Budget) NewGroup(name string, l Limits) (*Group, error) {
	l = l.Resolve(b.total)
	if l.Processes > 0 && l.Processes < MinProcesses {
		return nil, fmt.Errorf("%s %d: want at least %d (a kernel runs a dozen threads)", SettingProcesses, l.Processes, MinProcesses)
	}
	g := &Group{b: b, Limits: l, fd: -1}
	mk := func(parent string, mech Mechanism) (string, error) {
		dir := filepath.Join(parent, name)
		for _, d := range g.dirs {
			if d == dir {
				return dir, nil // v2: one cgroup holds both controllers
			}
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("process budget: create cgroup: %w", err)
		}
		g.dirs = append(g.dirs, dir)
		if mech == MechCgroup1 {
			g.join = append(g.join, filepath.Join(dir, "cgroup.procs"))
		} else {
			g.v2 = dir
		}
		return dir, nil
	}
	fail := func(err error) (*Group, error) {
		g.Remove()
		return nil, err
	}
	if b.pidsParent != "" && l.Processes > 0 {
		dir, err := mk(b.pidsParent, b.Pids)
		if err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(l.Processes)), 0); err != nil {
			return fail(fmt.Errorf("process budget: set %s/pids.max: %w", dir, err))
		}
		g.pidsDir = dir
	}
	if b.memParent != "" && l.Memory > 0 {
		dir, err := mk(b.memParent, b.Memory)
		if err != nil {
			return fail(err)
		}
		file := "memory.max"
		if b.Memory == MechCgroup1 {
			file, g.memV1 = "memory.limit_in_bytes", true
		}
		v := []byte(strconv.FormatInt(l.Memory, 10))
		if err := os.WriteFile(filepath.Join(dir, file), v, 0); err != nil {
			return fail(fmt.Errorf("process budget: set %s/%s: %w", dir, file, err))
		}
		if g.memV1 {
			// No swapping past the limit either, where swap is accounted.
			os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), v, 0)
		}
		g.memDir = dir
	}
	if g.v2 != "" {
		g.freeze = g.v2
	} else if b.freezerParent != "" && len(g.join) > 0 {
		dir, err := mk(b.freezerParent, MechCgroup1)
		if err != nil {
			return fail(err)
		}
		g.freeze, g.freezeV1 = dir, true
	}
	if g.v2 != "" {
		fd, err := syscall.Open(g.v2, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("process budget: open cgroup %s: %w", g.v2, err))
		}
		g.fd = fd
	}
	return g, nil
}

// joinScript writes the shell's pid into each cgroup.procs file given before "--", then
// execs the rest: the process is in its cgroups before it can fork.
const joinScript = `for f do [ "$f" = -- ] && break; echo $$ > "$f" || { echo "arbor: cannot join the cgroup $f" >&2; exit 126; }; shift; done; shift; exec "$@"`

// Outer wraps the command that starts the process tree (bwrap, or the kernel unsandboxed) so
// it joins its v1 cgroups before it execs.
func (g *Group) Outer(argv []string) []string {
	if g == nil || len(g.join) == 0 {
		return argv
	}
	out := append([]string{"/bin/sh", "-c", joinScript, "sh"}, g.join...)
	return append(append(out, "--"), argv...)
}

// Inner wraps the command run inside the sandbox so it sets the rlimit fallbacks first: in the
// sandbox's user namespace, where RLIMIT_NPROC counts only the sandbox's processes. Outside a
// sandbox it would count all of the user's, so unsandboxed commands get none.
func (g *Group) Inner(argv []string) []string {
	if g == nil {
		return argv
	}
	if pre := g.b.rlimitArgv(g.Limits); pre != nil {
		return append(pre, argv...)
	}
	return argv
}

// Apply puts cmd, built but not started, under the group: for a bwrap command line (bwrap's
// arguments, "--", the command) the rlimits go in front of the command inside the sandbox, and
// the whole joins the group's cgroups before it execs. Call [Group.Remove] after cmd.Wait.
func (g *Group) Apply(cmd *exec.Cmd) {
	if g == nil || len(cmd.Args) == 0 {
		return
	}
	args := cmd.Args
	if filepath.Base(args[0]) == "bwrap" {
		for i, a := range args {
			if a == "--" {
				args = append(append([]string(nil), args[:i+1]...), g.Inner(args[i+1:])...)
				break
			}
		}
	}
	args[0] = cmd.Path
	if out := g.Outer(args); len(out) != len(args) {
		cmd.Path, args = out[0], out
	}
	cmd.Args = args
	if fd := g.CgroupFD(); fd >= 0 {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
}

// CgroupFD is the v2 cgroup to clone the process into (SysProcAttr.UseCgroupFD), or -1.
func (g *Group) CgroupFD() int {
	if g == nil {
		return -1
	}
	return g.fd
}

// Counters reads the budget's events so far.
func (g *Group) Counters() Counters {
	var c Counters
	if g == nil {
		return c
	}
	if g.pidsDir != "" {
		b, _ := os.ReadFile(filepath.Join(g.pidsDir, "pids.events"))
		c.PidsMax = keyed(b, "max")
	}
	if g.memDir != "" {
		file := "memory.events"
		if g.memV1 {
			file = "memory.oom_control"
		}
		b, _ := os.ReadFile(filepath.Join(g.memDir, file))
		c.OOMKills = keyed(b, "oom_kill")
	}
	return c
}

// Explain is [Budget.Explain] for this group's limits.
func (g *Group) Explain(before, after Counters, errName, errText string) string {
	if g == nil {
		return ""
	}
	return g.b.Explain(g.Limits, before, after, errName, errText)
}

// Remove kills what is left in the group's cgroups and removes them. Call it once the process
// tree has ended.
func (g *Group) Remove() error {
	if g == nil {
		return nil
	}
	if g.fd >= 0 {
		syscall.Close(g.fd)
		g.fd = -1
	}
	var errs []error
	for _, d := range g.dirs {
		errs = append(errs, removeCgroup(d, 5*time.Second))
	}
	g.dirs = nil
	return errors.Join(errs...)
}

// PhysicalMemory is the machine's RAM in bytes (MemTotal), 0 when unknown.
func PhysicalMemory() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}
