package eventlog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ChildEnv is set in the environment of a crash-test writer process started by [Soak].
const ChildEnv = "ARBOR_EVENTLOG_CRASH_CHILD"

const (
	soakLogs       = 8  // sessions, one log each
	soakWriters    = 2  // goroutines appending to each log
	soakGeneration = 25 // cycles before the soak starts on fresh logs, so a long soak stays fast
)

// soakChild is the crash-test writer's configuration, passed as JSON in ChildEnv.
type soakChild struct {
	Dir   string `json:"dir"`
	Cycle int    `json:"cycle"`
}

// soakTick is the data of every record the crash-test writer appends.
type soakTick struct {
	C int `json:"c"` // cycle
	W int `json:"w"` // writer within the log
	N int `json:"n"` // count within (cycle, writer), from 0
	// P pads some records to several pages, so that batches span pages and a SIGKILL can
	// interrupt a write between them: that is how kill -9 makes real torn tails.
	P string `json:"p,omitempty"`
}

// CrashChild turns the process into a crash-test writer if [Soak] started it, and then never
// returns; otherwise it returns at once. Call it first thing in main (and in TestMain), so that
// Soak can re-execute the binary.
func CrashChild() {
	v, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return
	}
	var cfg soakChild
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintf(os.Stdout, "E bad %s: %v\n", ChildEnv, err)
		os.Exit(2)
	}
	runCrashChild(cfg)
	os.Exit(0)
}

// runCrashChild appends to soakLogs logs from soakWriters goroutines each until it is killed,
// writing "A <log> <seq> <writer> <n>" to stdout after each acknowledged append. Each line is one
// write of less than PIPE_BUF bytes, so a kill never leaves half a line in the pipe.
func runCrashChild(cfg soakChild) {
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.WriteString(fmt.Sprintf(format, args...))
	}
	logs := make([]*Log, soakLogs)
	for i := range logs {
		l, err := Open(soakPath(cfg.Dir, i), Options{})
		if err != nil {
			say("E %v\n", err)
			os.Exit(3)
		}
		logs[i] = l
	}
	say("R\n")
	ctx := context.Background()
	var wg sync.WaitGroup
	for i, l := range logs {
		for w := range soakWriters {
			wg.Go(func() {
				for n := 0; ; n++ {
					tick := soakTick{C: cfg.Cycle, W: w, N: n}
					if n%7 == 3 {
						tick.P = strings.Repeat("p", (n*2654435761)%20000)
					}
					r, err := l.Append(ctx, "soak_tick", tick)
					if err != nil {
						say("E %v\n", err)
						os.Exit(4)
					}
					say("A %d %d %d %d\n", i, r.Seq, w, n)
				}
			})
		}
	}
	wg.Wait()
}

func soakPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("s%d", i), LogName)
}

// ack is one append the crash-test writer reported as acknowledged.
type ack struct {
	seq  uint64
	tick soakTick
}

// Soak runs cycles of the crash test in dir: it starts this executable as a writer ([CrashChild])
// that appends to 8 logs from 16 goroutines, kills it with SIGKILL at a random moment (during
// recovery, right after it opened the logs, or after a random number of acknowledged appends),
// reopens every log and checks that no acknowledged record was lost, reordered or duplicated and
// that each writer's records are in order. It writes one line per cycle to w.
func Soak(ctx context.Context, dir string, cycles int, w io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(cycles), 0x50a4))
	var acked [soakLogs][]ack // acknowledged in the current generation, per log
	var total int
	for c := range cycles {
		if err := ctx.Err(); err != nil {
			return err
		}
		gen := filepath.Join(dir, fmt.Sprintf("gen%d", c/soakGeneration))
		if c%soakGeneration == 0 {
			acked = [soakLogs][]ack{}
		}
		plan := killPlan{after: 1 + rng.IntN(400)}
		switch rng.IntN(10) {
		case 0:
			// After a random delay: while the runtime starts, or while Open recovers (cutting
			// a torn tail left by the previous kill).
			plan = killPlan{after: -1, delay: time.Duration(rng.IntN(30_000)) * time.Microsecond}
		case 1:
			plan.after = 0 // right after the logs are open
		}
		got, err := crashOnce(exe, soakChild{Dir: gen, Cycle: c}, plan)
		if err != nil {
			return fmt.Errorf("soak cycle %d: %w", c, err)
		}
		for _, a := range got {
			a.tick.C = c
			acked[a.log] = append(acked[a.log], a.ack)
		}
		last := c == cycles-1 || c%soakGeneration == soakGeneration-1
		records, torn, err := verifySoak(gen, &acked, last)
		if err != nil {
			return fmt.Errorf("soak cycle %d: %w", c, err)
		}
		total += len(got)
		fmt.Fprintf(w, "cycle %d: killed after %d acks (%s); %d records in %d logs verified, %d torn tails cut in this generation\n",
			c, len(got), plan, records, soakLogs, torn)
	}
	torn, _ := filepath.Glob(filepath.Join(dir, "gen*", "s*", LogName+".torn-*"))
	fmt.Fprintf(w, "soak: %d cycles, %d acknowledged appends, none lost, reordered or duplicated; %d torn tails recovered\n",
		cycles, total, len(torn))
	return nil
}

type loggedAck struct {
	log int
	ack
}

// killPlan says when crashOnce kills the writer: after it reported `after` acks (0: as soon as
// its logs are open), or, with after -1, once delay has passed since it started.
type killPlan struct {
	after int
	delay time.Duration
}

func (p killPlan) String() string {
	switch p.after {
	case -1:
		return fmt.Sprintf("planned at %v", p.delay)
	case 0:
		return "planned once open"
	}
	return fmt.Sprintf("planned after %d", p.after)
}

// crashOnce runs one writer process and kills it as planned. It returns every ack the writer
// reported before it died.
func crashOnce(exe string, cfg soakChild, plan killPlan) ([]loggedAck, error) {
	killAfter := plan.after
	env, _ := json.Marshal(cfg)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(env))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var once sync.Once
	kill := func() { once.Do(func() { cmd.Process.Kill() }) }
	defer kill()
	if killAfter < 0 {
		timer := time.AfterFunc(plan.delay, kill)
		defer timer.Stop()
	}
	var acks []loggedAck
	var childErr error
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "R":
			if killAfter == 0 {
				kill()
			}
		case strings.HasPrefix(line, "A "):
			a, err := parseAck(line)
			if err != nil {
				return nil, err
			}
			acks = append(acks, a)
			if len(acks) == killAfter {
				kill()
			}
		case strings.HasPrefix(line, "E "):
			childErr = errors.New(line[2:])
			kill()
		}
	}
	// The pipe reaches EOF only when the writer is dead, so every ack it sent has been read.
	kill()
	werr := cmd.Wait()
	if childErr != nil {
		return nil, fmt.Errorf("writer: %w", childErr)
	}
	// Anything but our SIGKILL (a panic, a race report's exit 66) is a failure of its own.
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		return nil, fmt.Errorf("writer died by itself: %v", werr)
	}
	return acks, sc.Err()
}

func parseAck(line string) (loggedAck, error) {
	f := strings.Fields(line)
	var v [4]uint64
	if len(f) != 5 {
		return loggedAck{}, fmt.Errorf("bad ack line %q", line)
	}
	for i := range v {
		x, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return loggedAck{}, fmt.Errorf("bad ack line %q", line)
		}
		v[i] = x
	}
	return loggedAck{log: int(v[0]), ack: ack{seq: v[1], tick: soakTick{W: int(v[2]), N: int(v[3])}}}, nil
}

// verifySoak checks every log of a generation against the acknowledged appends. It reads with
// ReadFile, which changes nothing, so that cutting a torn tail is left to the next writer's Open,
// where a kill can interrupt it; with reopen it recovers with Open, as a restarted daemon would.
func verifySoak(gen string, acked *[soakLogs][]ack, reopen bool) (records, torn int, err error) {
	for i := range soakLogs {
		path := soakPath(gen, i)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && len(acked[i]) == 0 {
			continue // killed before this log was created
		}
		recs, err := readSoakLog(path, reopen)
		if err != nil {
			return 0, 0, err
		}
		if err := checkSoakLog(path, recs, acked[i]); err != nil {
			return 0, 0, err
		}
		records += len(recs)
		aside, _ := filepath.Glob(path + ".torn-*")
		torn += len(aside)
	}
	return records, torn, nil
}

func readSoakLog(path string, reopen bool) ([]Record, error) {
	if !reopen {
		return ReadFile(path)
	}
	l, err := Open(path, Options{})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Records(1)
}

func checkSoakLog(path string, recs []Record, acked []ack) error {
	ticks := make([]soakTick, len(recs))
	next := map[[2]int]int{} // (cycle, writer) → next n
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			return fmt.Errorf("%s: record %d has seq %d", path, i, r.Seq)
		}
		if err := json.Unmarshal(r.Data, &ticks[i]); err != nil {
			return fmt.Errorf("%s: seq %d: %w", path, r.Seq, err)
		}
		t := ticks[i]
		k := [2]int{t.C, t.W}
		if t.N != next[k] {
			return fmt.Errorf("%s: seq %d: cycle %d writer %d has n=%d, want %d (duplicated, reordered or lost)",
				path, r.Seq, t.C, t.W, t.N, next[k])
		}
		next[k]++
	}
	for _, a := range acked {
		if a.seq > uint64(len(recs)) {
			return fmt.Errorf("%s: acknowledged seq %d lost: the log ends at %d", path, a.seq, len(recs))
		}
		if t := ticks[a.seq-1]; t.C != a.tick.C || t.W != a.tick.W || t.N != a.tick.N {
			return fmt.Errorf("%s: seq %d holds %+v, but %+v was acknowledged with it", path, a.seq, t, a.tick)
		}
	}
	return nil
}
