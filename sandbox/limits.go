package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// # The process and memory budget
//
// Every sandboxed process tree — a kernel, a setup command — gets a budget of tasks (processes
// and threads: a fork bomb, or a runaway pool of workers) and of memory, so that one cell
// cannot exhaust the machine's pids or RAM and take the daemon and the other sessions with it.
// [DetectBudget] decides once per daemon how each limit can be enforced here, best first:
//
//   - a cgroup v2 of its own (pids.max, memory.max), when the daemon's cgroup is delegated to
//     it (systemd-run --user --scope -p Delegate=yes, or a root daemon) and the controllers are
//     on the v2 hierarchy; the process is cloned straight into it (CLONE_INTO_CGROUP);
//   - a cgroup v1 of its own under the daemon's (pids.max, memory.limit_in_bytes), when the v1
//     hierarchy is writable (in practice: a root daemon); the process joins it before it
//     execs bubblewrap, so there is no moment it could fork outside;
//   - else RLIMIT_NPROC and RLIMIT_AS, set by prlimit inside the sandbox's new user namespace.
//     Since Linux 5.14 RLIMIT_NPROC counts the processes of a user in a user namespace, so the
//     limit counts only that sandbox's processes and not the user's others. The kernel exempts
//     the global root user from RLIMIT_NPROC — a root daemon's sandbox is bounded only by a
//     cgroup — and RLIMIT_AS bounds each process's address space, not their sum.
//
// Each process tree's cgroups are removed when it has ended; the leftovers of a daemon that
// was killed (arbor.<ns>.<pid> for a pid of its namespace that no longer runs) are removed when
// the next one starts.

// Limits is a process tree's budget. Zero means the default of [DefaultLimits]; negative means
// no limit.
type Limits struct {
	// Processes bounds the tasks — processes and threads — alive at once.
	Processes int
	// Memory bounds the memory in bytes: of the whole tree under a cgroup, of each process's
	// address space under RLIMIT_AS.
	Memory int64
}

// DefaultProcesses is the default task budget: above what builds, test runners and thread
// pools use (threads count), far below the machine's pid space.
const DefaultProcesses = 1024

// DefaultMemoryShare is the default memory budget, as a share of the memory the daemon may use
// (the machine's RAM, or its own cgroup's limit if lower): a runaway cell leaves the rest to
// the daemon and everything else.
const DefaultMemoryShare = 0.5

// Resolve fills zero fields with the defaults for a daemon that may use total bytes of memory.
func (l Limits) Resolve(total int64) Limits {
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.Memory == 0 && total > 0 {
		l.Memory = int64(float64(total) * DefaultMemoryShare)
	}
	return l
}

// The budget's settings, as the configuration files spell them.
const (
	SettingProcesses = "limits.processes"
	SettingMemory    = "limits.memory"
)

// ParseMemory reads a memory setting: bytes with an optional binary or decimal unit ("8GiB",
// "512MiB", "2G", "1.5GB", "1073741824"), a share of total ("50%"), or "unlimited" (-1).
func ParseMemory(s string, total int64) (int64, error) {
	v := strings.TrimSpace(s)
	if v == "unlimited" {
		return -1, nil
	}
	bad := fmt.Errorf("%s %q: want bytes with a unit such as \"8GiB\" or \"512MiB\", a share of the machine's memory such as \"50%%\", or \"unlimited\"", SettingMemory, s)
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f <= 0 || f > 100 {
			return 0, bad
		}
		if total <= 0 {
			return 0, fmt.Errorf("%s %q: the machine's memory is unknown here; give bytes, such as \"8GiB\"", SettingMemory, s)
		}
		return int64(float64(total) * f / 100), nil
	}
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := v, ""
	if i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i:])
	}
	mult, ok := memUnits[strings.ToLower(unit)]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || f <= 0 || f*mult > math.MaxInt64/2 {
		return 0, bad
	}
	if b := int64(f * mult); b >= minMemory {
		return b, nil
	}
	return 0, fmt.Errorf("%s %q: want at least 64MiB: less cannot start a kernel", SettingMemory, s)
}

const minMemory = 64 << 20

// MinProcesses is the least task budget a kernel starts with (ipykernel runs a dozen threads).
const MinProcesses = 32

var memUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "tib": 1 << 40,
}

// FormatBytes prints n in the largest binary unit that keeps one decimal honest.
func FormatBytes(n int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.v {
			f := float64(n) / float64(u.v)
			if f == math.Trunc(f) {
				return fmt.Sprintf("%.0f%s", f, u.s)
			}
			return fmt.Sprintf("%.1f%s", f, u.s)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// Mechanism is how one limit is enforced.
type Mechanism int

// The mechanisms, best first. The zero value is no limit at all.
const (
	MechNone Mechanism = iota
	MechCgroup2
	MechCgroup1
	MechRlimit
)

func (m Mechanism) String() string {
	switch m {
	case MechCgroup2:
		return "cgroup v2"
	case MechCgroup1:
		return "cgroup v1"
	case MechRlimit:
		return "rlimit"
	}
	return "none"
}

// cgroupLine is one line of /proc/self/cgroup.
type cgroupLine struct {
	controllers []string // empty for v2's "0::/path"
	path        string
}

// parseProcCgroup reads /proc/<pid>/cgroup: v1 paths by controller, and the v2 path ("" when
// the process is in no v2 hierarchy).
func parseProcCgroup(data []byte) (v1 map[string]string, v2 string, ok2 bool) {
	v1 = map[string]string{}
	for _, l := range parseLines(data) {
		if len(l.controllers) == 0 {
			v2, ok2 = l.path, true
			continue
		}
		for _, c := range l.controllers {
			v1[c] = l.path
		}
	}
	return v1, v2, ok2
}

func parseLines(data []byte) []cgroupLine {
	var out []cgroupLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		var cs []string
		if f[1] != "" {
			cs = strings.Split(f[1], ",")
		}
		out = append(out, cgroupLine{controllers: cs, path: f[2]})
	}
	return out
}

// cgroupMount is one cgroup filesystem of /proc/self/mountinfo.
type cgroupMount struct {
	dir         string
	v2          bool
	root        string   // the mount's root within the hierarchy (not "/" inside a cgroup namespace)
	controllers []string // v1: the controllers of this hierarchy
}

// parseMountinfo finds the cgroup and cgroup2 mounts in /proc/self/mountinfo.
func parseMountinfo(data []byte) []cgroupMount {
	var out []cgroupMount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// id parent maj:min root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		m := cgroupMount{dir: unescapeMount(a[4]), root: unescapeMount(a[3])}
		switch b[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(b[2], ",") {
				switch o {
				case "pids", "memory", "freezer":
					m.controllers = append(m.controllers, o)
				}
			}
			if len(m.controllers) == 0 {
				continue
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 is a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// keyed reads "key value" lines (pids.events, memory.events, memory.oom_control) and returns
// the value of key, 0 when absent.
func keyed(data []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// facts is what detection found on this machine, for [plan] to decide from.
type facts struct {
	uid     int
	mounts  []cgroupMount
	v1      map[string]string // the daemon's v1 cgroup by controller
	v2      string            // the daemon's v2 cgroup
	has2    bool
	prlimit string // the prlimit binary, "" when missing
	// v2Controllers lists the controllers the daemon's v2 cgroup offers its children (its
	// cgroup.controllers); v2Delegable says whether the daemon may create children there
	// with them enabled, and why not.
	v2Controllers []string
	v2Delegable   error
	// v2Parent is where the session cgroups go when not in the daemon's own v2 cgroup: a root
	// daemon that shares its cgroup (a terminal's session scope) makes them at the hierarchy's
	// root instead.
	v2Parent string
	// writable says whether the daemon may create cgroups in dir; its error says why not.
	writable func(dir string) error
}

// choice is how one controller is enforced, and where.
type choice struct {
	mech   Mechanism
	parent string // the cgroup the session cgroups are made in (v1, v2)
	why    string // for the log: why nothing better was used
}

// plan decides, for pids and for memory, the best mechanism the facts allow.
func plan(f facts) (pids, mem choice) {
	return planOne(f, "pids"), planOne(f, "memory")
}

func planOne(f facts, ctrl string) choice {
	var why []string
	if f.has2 {
		if m, ok := findMount(f.mounts, true, ""); ok {
			dir := joinCgroup(m, f.v2)
			switch {
			case !contains(f.v2Controllers, ctrl):
				why = append(why, fmt.Sprintf("cgroup v2 at %s offers no %s controller", dir, ctrl))
			case f.v2Delegable != nil:
				why = append(why, fmt.Sprintf("cgroup v2 at %s: %v", dir, f.v2Delegable))
			case f.v2Parent != "":
				return choice{mech: MechCgroup2, parent: f.v2Parent}
			default:
				return choice{mech: MechCgroup2, parent: dir}
			}
		}
	}
	if m, ok := findMount(f.mounts, false, ctrl); ok {
		p, in := f.v1[ctrl]
		if in {
			dir := joinCgroup(m, p)
			if err := f.writable(dir); err != nil {
				why = append(why, fmt.Sprintf("cgroup v1 %s at %s: %v", ctrl, dir, err))
			} else {
				return choice{mech: MechCgroup1, parent: dir}
			}
		}
	} else if !f.has2 {
		why = append(why, fmt.Sprintf("no cgroup hierarchy has the %s controller", ctrl))
	}
	if f.prlimit == "" {
		why = append(why, "prlimit (util-linux) is not installed")
		return choice{mech: MechNone, why: strings.Join(why, "; ")}
	}
	if ctrl == "pids" && f.uid == 0 {
		// Root is exempt from RLIMIT_NPROC: nothing bounds a root daemon's sandbox but a cgroup.
		why = append(why, "and RLIMIT_NPROC does not bind root")
		return choice{mech: MechNone, why: strings.Join(why, "; ")}
	}
	return choice{mech: MechRlimit, why: strings.Join(why, "; ")}
}

func findMount(ms []cgroupMount, v2 bool, ctrl string) (cgroupMount, bool) {
	for _, m := range ms {
		if m.v2 == v2 && (v2 || contains(m.controllers, ctrl)) {
			return m, true
		}
	}
	return cgroupMount{}, false
}

// joinCgroup maps a cgroup path of /proc/self/cgroup to its directory under mount m.
func joinCgroup(m cgroupMount, p string) string {
	rel := p
	if m.root != "/" {
		rel = strings.TrimPrefix(p, m.root)
	}
	rel = strings.TrimPrefix(rel, "/")
	if rel == "" {
		return m.dir
	}
	return m.dir + "/" + rel
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Counters are the budget's events so far: how often a fork or clone failed at the task
// limit, and how many processes the memory limit killed.
type Counters struct {
	PidsMax  int64
	OOMKills int64
}

// Budget says how this machine enforces each limit, for the log and `arbor daemon status`.
type Budget struct {
	Pids, Memory Mechanism
	// Reason says why a limit is not enforced by a cgroup; "" when both are.
	Reason string

	pidsParent, memParent string // the daemon's own arbor.<ns>.<pid> cgroups
	freezerParent         string // and its v1 freezer cgroup, beside v1 pids or memory ones
	prlimit               string
	total                 int64 // memory the daemon may use
}

// String says in one line how each limit is enforced here.
func (b *Budget) String() string {
	s := fmt.Sprintf("processes: %s, memory: %s", describe(b.Pids, "pids.max", "RLIMIT_NPROC in the sandbox's user namespace"),
		describe(b.Memory, "memory limit", "RLIMIT_AS per process"))
	if b.Reason != "" {
		s += " (" + b.Reason + ")"
	}
	return s
}

func describe(m Mechanism, cg, rl string) string {
	switch m {
	case MechCgroup1, MechCgroup2:
		return m.String() + " " + cg
	case MechRlimit:
		return rl
	}
	return "not limited"
}

// Total is the memory the daemon may use: the machine's RAM or its own cgroup's limit.
func (b *Budget) Total() int64 { return b.total }

// rlimitArgv is the prlimit prefix that sets the rlimit fallbacks, run inside the sandbox;
// nil when neither limit is an rlimit.
func (b *Budget) rlimitArgv(l Limits) []string {
	var args []string
	if b.Pids == MechRlimit && l.Processes > 0 {
		args = append(args, fmt.Sprintf("--nproc=%d", l.Processes))
	}
	if b.Memory == MechRlimit && l.Memory > 0 {
		args = append(args, fmt.Sprintf("--as=%d", l.Memory))
	}
	if len(args) == 0 {
		return nil
	}
	return append(append([]string{b.prlimit}, args...), "--")
}

// Explain says what the budget did to a cell between two readings of its counters, naming the
// setting to raise; "" when nothing. errName and errText are the cell's exception, if any:
// under an rlimit there are no counters, and the exception is all that tells.
func (b *Budget) Explain(l Limits, before, after Counters, errName, errText string) string {
	var out []string
	switch {
	case after.PidsMax > before.PidsMax:
		out = append(out, fmt.Sprintf("The kernel reached its process limit (%d processes and threads at once, %s): "+
			"fork and thread creation failed with EAGAIN (BlockingIOError: Resource temporarily unavailable). "+
			"End the processes it started, or raise %s in the user config or arbor.json (a repository's needs arbor trust).",
			l.Processes, b.Pids, SettingProcesses))
	case b.Pids == MechRlimit && (errName == "BlockingIOError" || strings.Contains(errText, "Resource temporarily unavailable") || strings.Contains(errText, "can't start new thread")):
		out = append(out, fmt.Sprintf("This is likely the kernel's process limit (%d processes and threads, RLIMIT_NPROC): "+
			"end the processes it started, or raise %s in the user config or arbor.json.", l.Processes, SettingProcesses))
	}
	switch {
	case after.OOMKills > before.OOMKills:
		out = append(out, fmt.Sprintf("The memory limit (%s, %s) killed %d process(es) of the kernel. "+
			"Use less memory, or raise %s in the user config or arbor.json (a repository's needs arbor trust).",
			FormatBytes(l.Memory), b.Memory, after.OOMKills-before.OOMKills, SettingMemory))
	case b.Memory == MechRlimit && errName == "MemoryError":
		out = append(out, fmt.Sprintf("This is likely the kernel's memory limit (%s of address space per process, RLIMIT_AS): "+
			"use less memory, or raise %s in the user config or arbor.json.", FormatBytes(l.Memory), SettingMemory))
	}
	return strings.Join(out, " ")
}
