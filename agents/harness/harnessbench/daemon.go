package harnessbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/arborhq/arbor/server/startbench"

	"github.com/arborhq/arbor/bench"
)

// daemon times `arbor daemon` from exec to a socket that accepts, with data as XDG_DATA_HOME
// (its global harness store holding every entry) and with an empty one, alternating which goes
// first so that a burst of load falls on both.
func daemon(ctx context.Context, rep *bench.Report, tmp, data string, o Options) error {
	empty := filepath.Join(tmp, "empty-data")
	if err := os.MkdirAll(empty, 0o700); err != nil {
		return err
	}
	sock := filepath.Join(tmp, "run", "arbor.sock")
	env := append(os.Environ(), "ARBOR_SOCKET="+sock,
		"ARBOR_STATE_DIR="+filepath.Join(tmp, "state"), "XDG_CONFIG_HOME="+filepath.Join(tmp, "config"))
	with := append(env[:len(env):len(env)], "XDG_DATA_HOME="+data)
	without := append(env[:len(env):len(env)], "XDG_DATA_HOME="+empty)
	var ws, wos, deltas p50s
	for range o.Runs {
		var w, wo []time.Duration
		for i := range o.Starts {
			for _, store := range []bool{i%2 == 0, i%2 == 1} {
				e := without
				if store {
					e = with
				}
				d, err := startbench.DaemonReady(ctx, o.Exe, e, sock)
				if err != nil {
					return err
				}
				if store {
					w = append(w, d)
				} else {
					wo = append(wo, d)
				}
			}
		}
		ws.add(w)
		wos.add(wo)
		deltas = append(deltas, ws[len(ws)-1]-wos[len(wos)-1])
	}
	v, sp := ws.median()
	ref, _ := wos.median()
	n := fmt.Sprintf("%d starts of each a run; the daemon opens the global store at a session's first turn or harness call, not at start", o.Starts)
	rep.Add(bench.Figure{Name: "daemon start → ready socket, global store of every entry", Value: v, Spread: sp, Unit: "ms",
		Reference: "the same daemon, empty XDG_DATA_HOME", RefValue: ref, Note: n})
	v, sp = deltas.median()
	rep.Add(bench.Figure{Name: "daemon start: with the global store minus without", Value: v, Spread: sp, Unit: "ms",
		Goal: "<= 20 ms", Note: "p50 with minus p50 without, per run"})
	return nil
}
