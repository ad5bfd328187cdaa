package sandbox

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestParseMemory(t *testing.T) {
	const total = 16 << 30
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"8GiB", 8 << 30, ""},
		{"512MiB", 512 << 20, ""},
		{"2G", 2e9, ""},
		{"1.5GiB", 3 << 29, ""},
		{" 1073741824 ", 1 << 30, ""},
		{"50%", 8 << 30, ""},
		{"unlimited", -1, ""},
		{"12MiB", 0, "at least 64MiB"},
		{"0", 0, "want bytes"},
		{"-1GiB", 0, "want bytes"},
		{"8 parsecs", 0, "want bytes"},
		{"150%", 0, "want bytes"},
		{"", 0, "want bytes"},
	} {
		got, err := ParseMemory(c.in, total)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), SettingMemory) {
				t.Errorf("ParseMemory(%q) = %d, %v; want an error naming %s and saying %q", c.in, got, err, SettingMemory, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	if _, err := ParseMemory("50%", 0); err == nil {
		t.Error("a share of an unknown total parsed")
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{256 << 20: "256MiB", 3 << 29: "1.5GiB", 100: "100B", 8 << 30: "8GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestResolveLimits(t *testing.T) {
	got := Limits{}.Resolve(10 << 30)
	if got.Processes != DefaultProcesses || got.Memory != 5<<30 {
		t.Errorf("defaults for 10GiB = %+v", got)
	}
	if got := (Limits{Processes: -1, Memory: 1 << 30}).Resolve(10 << 30); got.Processes != -1 || got.Memory != 1<<30 {
		t.Errorf("explicit limits changed: %+v", got)
	}
}

const hybridCgroup = `9:name=systemd:/
8:pids:/
4:memory:/process_api/0708
2:cpu,cpuacct:/
0::/
`

const hybridMounts = `30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
33 30 0:29 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids
34 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 / /sys/fs/cgroup/sys\040tem rw - cgroup cgroup rw,name=systemd
`

const v2Mounts = `30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
`

func TestParseCgroups(t *testing.T) {
	v1, v2, ok := parseProcCgroup([]byte(hybridCgroup))
	if !ok || v2 != "/" || v1["pids"] != "/" || v1["memory"] != "/process_api/0708" || v1["cpuacct"] != "/" {
		t.Errorf("parseProcCgroup = %v, %q, %v", v1, v2, ok)
	}
	ms := parseMountinfo([]byte(hybridMounts))
	want := []cgroupMount{
		{dir: "/sys/fs/cgroup/unified", v2: true, root: "/"},
		{dir: "/sys/fs/cgroup/memory", root: "/", controllers: []string{"memory"}},
		{dir: "/sys/fs/cgroup/pids", root: "/", controllers: []string{"pids"}},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Errorf("parseMountinfo =\n%+v\nwant\n%+v", ms, want)
	}
	if got := unescapeMount(`/a\040b`); got != "/a b" {
		t.Errorf("unescapeMount = %q", got)
	}
	if got := joinCgroup(cgroupMount{dir: "/sys/fs/cgroup", root: "/user.slice"}, "/user.slice/app.scope"); got != "/sys/fs/cgroup/app.scope" {
		t.Errorf("joinCgroup under a cgroup namespace root = %q", got)
	}
}

func TestKeyed(t *testing.T) {
	if got := keyed([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), "oom_kill"); got != 3 {
		t.Errorf("oom_kill = %d", got)
	}
	if got := keyed([]byte("max 12\n"), "max"); got != 12 {
		t.Errorf("max = %d", got)
	}
	if got := keyed(nil, "max"); got != 0 {
		t.Errorf("absent = %d", got)
	}
}

// plan picks, per controller, a delegated v2 cgroup, else a writable v1 one, else an rlimit
// (never for root's processes), and says why it fell back.
func TestPlan(t *testing.T) {
	ok := func(string) error { return nil }
	denied := func(string) error { return errors.New("not writable by uid 1000") }
	hyb := parseMountinfo([]byte(hybridMounts))
	v2 := parseMountinfo([]byte(v2Mounts))
	v1map := map[string]string{"pids": "/", "memory": "/process_api/0708"}
	for _, c := range []struct {
		name           string
		f              facts
		pids, mem      Mechanism
		pidsDir, memDr string
		why            string
	}{
		{"root on hybrid v1", facts{uid: 0, mounts: hyb, v1: v1map, v2: "/", has2: true, prlimit: "/usr/bin/prlimit", writable: ok},
			MechCgroup1, MechCgroup1, "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory/process_api/0708", ""},
		{"user on hybrid v1", facts{uid: 1000, mounts: hyb, v1: v1map, v2: "/", has2: true, prlimit: "/usr/bin/prlimit", writable: denied},
			MechRlimit, MechRlimit, "", "", "not writable by uid 1000"},
		{"root without a cgroup", facts{uid: 0, prlimit: "/usr/bin/prlimit", writable: denied},
			MechNone, MechRlimit, "", "", "RLIMIT_NPROC does not bind root"},
		{"user without prlimit", facts{uid: 1000, mounts: hyb, v1: v1map, has2: true, writable: denied},
			MechNone, MechNone, "", "", "prlimit"},
		{"delegated v2", facts{uid: 1000, mounts: v2, v2: "/user.slice/arbor.scope", has2: true, v2Controllers: []string{"cpu", "memory", "pids"}, writable: denied},
			MechCgroup2, MechCgroup2, "/sys/fs/cgroup/user.slice/arbor.scope", "/sys/fs/cgroup/user.slice/arbor.scope", ""},
		{"v2 shared with a shell", facts{uid: 1000, mounts: v2, v2: "/user.slice/session-2.scope", has2: true, v2Controllers: []string{"memory", "pids"},
			v2Delegable: errors.New("shared with other processes"), prlimit: "/usr/bin/prlimit", writable: denied},
			MechRlimit, MechRlimit, "", "", "shared with other processes"},
		{"root sharing its v2 cgroup", facts{uid: 0, mounts: v2, v2: "/user.slice/session-2.scope", has2: true, v2Controllers: []string{"memory", "pids"},
			v2Parent: "/sys/fs/cgroup", writable: denied},
			MechCgroup2, MechCgroup2, "/sys/fs/cgroup", "/sys/fs/cgroup", ""},
		{"v2 with memory only", facts{uid: 0, mounts: v2, v2: "/", has2: true, v2Controllers: []string{"memory"}, writable: denied},
			MechNone, MechCgroup2, "", "/sys/fs/cgroup", "offers no pids controller"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, m := plan(c.f)
			if p.mech != c.pids || m.mech != c.mem {
				t.Errorf("plan = pids %v, memory %v; want %v, %v (%q %q)", p.mech, m.mech, c.pids, c.mem, p.why, m.why)
			}
			if c.pidsDir != "" && p.parent != c.pidsDir || c.memDr != "" && m.parent != c.memDr {
				t.Errorf("parents = %q, %q; want %q, %q", p.parent, m.parent, c.pidsDir, c.memDr)
			}
			if why := p.why + " " + m.why; !strings.Contains(why, c.why) {
				t.Errorf("reasons %q do not say %q", why, c.why)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	l := Limits{Processes: 64, Memory: 256 << 20}
	cg := &Budget{Pids: MechCgroup1, Memory: MechCgroup1}
	rl := &Budget{Pids: MechRlimit, Memory: MechRlimit, prlimit: "/usr/bin/prlimit"}
	for _, c := range []struct {
		name          string
		b             *Budget
		before, after Counters
		errName, text string
		want          []string // "" = no notice
	}{
		{"nothing happened", cg, Counters{PidsMax: 2}, Counters{PidsMax: 2}, "", "", nil},
		{"forks refused", cg, Counters{}, Counters{PidsMax: 1}, "", "", []string{"process limit (64", SettingProcesses, "EAGAIN"}},
		{"oom kill", cg, Counters{OOMKills: 1}, Counters{OOMKills: 2}, "", "", []string{"memory limit (256MiB", "killed 1", SettingMemory}},
		{"rlimit fork failure", rl, Counters{}, Counters{}, "BlockingIOError", "[Errno 11] Resource temporarily unavailable", []string{"RLIMIT_NPROC", SettingProcesses}},
		{"rlimit MemoryError", rl, Counters{}, Counters{}, "MemoryError", "", []string{"RLIMIT_AS", SettingMemory}},
		{"a cgroup's MemoryError is not guessed at", cg, Counters{}, Counters{}, "MemoryError", "", nil},
	} {
		got := c.b.Explain(l, c.before, c.after, c.errName, c.text)
		if len(c.want) == 0 && got != "" {
			t.Errorf("%s: notice %q, want none", c.name, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: notice %q lacks %q", c.name, got, w)
			}
		}
	}
}

func TestRlimitArgv(t *testing.T) {
	b := &Budget{Pids: MechRlimit, Memory: MechCgroup1, prlimit: "/usr/bin/prlimit"}
	got := b.rlimitArgv(Limits{Processes: 100, Memory: 1 << 30})
	if want := []string{"/usr/bin/prlimit", "--nproc=100", "--"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rlimitArgv = %q, want %q", got, want)
	}
	if got := (&Budget{Pids: MechCgroup1, Memory: MechCgroup1}).rlimitArgv(Limits{Processes: 100}); got != nil {
		t.Errorf("rlimitArgv with cgroups = %q, want none", got)
	}
}

func TestPhysicalMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MemTotal is Linux's")
	}
	if n := PhysicalMemory(); n < 64<<20 {
		t.Errorf("PhysicalMemory = %d, want the machine's RAM", n)
	}
}
