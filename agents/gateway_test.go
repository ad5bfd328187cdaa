package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/kernel/jupytertest"
)

const gatewayScript = `{"rules":[
 {"when":{"task":"^rename greet","turn":1},"code":"import os\nsrc = open('main.py').read()\nopen('main.py', 'w').write(src.replace('def greet', 'def welcome').replace('greet()', 'welcome()'))\nprint('remote', 'JPY_PARENT_PID' in os.environ, os.getcwd() == os.path.realpath('.'))\nprint('pid', os.getpid())"},
 {"when":{"task":"^rename greet","turn":2},"code":"h = await rlm('update the tests for welcome', name='tests')\nprint('spawned', h.name)"},
 {"when":{"task":"^rename greet","last":"^check"},"code":"import os\nprint('after kill', open('main.py').read().count('welcome'), 'JPY_PARENT_PID' in os.environ)"},
 {"when":{"task":"^rename greet","last":"^sleep"},"code":"import time\ntime.sleep(120)"},
 {"when":{"task":"^rename greet","last":"^again"},"code":"print('back', 6*7)"},
 {"when":{"task":"^rename greet"},"text":"ok"},
 {"when":{"task":"update the tests","turn":1},"code":"import os\nopen('test_main.py', 'w').write('from main import welcome\\n')\nprint('child remote', 'JPY_PARENT_PID' in os.environ)\nawait agent_message.send('tests updated', receiver_role='parent')"},
 {"when":{"task":"update the tests"},"text":"done"}
],"default":{"text":"nothing scripted"}}`

// TestGatewaySession: with "kernels.gateway" in the user config, a session's kernel runs on a
// real Jupyter Server (token auth): it does the refactor in the session's worktree, spawns a
// child through rlm() (whose kernel runs there too and messages back over the comm bridge),
// survives its kernel being killed, fails a cell with the reason when the server stops under
// it, and works again once the server is back.
func TestGatewaySession(t *testing.T) {
	srv := jupytertest.Start(t)
	e := newEnv(t, gatewayScript)
	t.Setenv("GW_TEST_TOKEN", srv.Token)
	conf := fmt.Sprintf(`{"kernels":{"gateway":{"url":%q,"tokenEnv":"GW_TEST_TOKEN","kernelName":%q}}}`, srv.URL, jupytertest.KernelName)
	userConfig(t, conf)
	os.WriteFile(filepath.Join(e.repo, "main.py"), []byte("def greet():\n    print('hi')\n\ngreet()\n"), 0o644)
	git(t, e.repo, "commit", "-qam", "greet")

	root := e.create("rename greet to welcome")
	e.settled(root)
	outs := e.events(root, event.TypeToolFinished)
	if len(outs) < 2 || !strings.Contains(fmt.Sprint(outs[0]["output"]), "remote True True") || !strings.Contains(fmt.Sprint(outs[1]["output"]), "spawned tests") {
		t.Fatalf("root's cells: %v\nserver log:\n%s", outs, srv.Log())
	}
	if got := git(t, e.repo, "show", root.meta.Branch+":main.py"); !strings.Contains(got, "def welcome") {
		t.Fatalf("the refactor is not on the session's branch: %q", got)
	}
	kids := root.childIDs()
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	child, _ := e.svc.Get(kids[0])
	if co := e.events(child, event.TypeToolFinished); len(co) == 0 || !strings.Contains(fmt.Sprint(co[0]["output"]), "child remote True") {
		t.Fatalf("child's cell: %v", co)
	}
	if got := git(t, e.repo, "show", child.meta.Branch+":test_main.py"); !strings.Contains(got, "welcome") {
		t.Fatalf("child's work: %q", got)
	}
	reported := false
	for _, m := range e.events(root, event.TypeUserMessage) {
		reported = reported || strings.Contains(fmt.Sprint(m["text"]), "tests updated")
	}
	if !reported {
		t.Fatal("the child's message did not reach the root")
	}

	// The kernel is killed under the server (which restarts it empty): the next cell runs
	// on a new kernel, the worktree's work intact.
	var pid int
	for _, l := range strings.Split(fmt.Sprint(outs[0]["output"]), "\n") {
		if v, ok := strings.CutPrefix(l, "pid "); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if pid == 0 {
		t.Fatalf("no pid in %v", outs[0])
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k := root.kernel.current()
	e.waitFor("the killed kernel to be noticed", func() bool {
		select {
		case <-k.Done():
			return true
		default:
			return false
		}
	})
	send := func(text string) map[string]any {
		t.Helper()
		n := len(e.events(root, event.TypeToolFinished))
		if _, err := e.svc.Send(context.Background(), root.meta.ID, text, "auto"); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the cell of "+text, func() bool { return len(e.events(root, event.TypeToolFinished)) > n })
		e.settled(root)
		return e.events(root, event.TypeToolFinished)[n]
	}
	if out := send("check the file"); !strings.Contains(fmt.Sprint(out["output"]), "after kill 2 True") {
		t.Fatalf("after the kill: %v", out)
	}

	// The server stops while a cell runs: the cell fails saying so, and never hangs.
	n := len(e.events(root, event.TypeToolStarted))
	go func() {
		e.waitFor("the sleeping cell to start", func() bool { return len(e.events(root, event.TypeToolStarted)) > n })
		srv.Stop()
	}()
	if out := send("sleep a while"); !strings.Contains(fmt.Sprint(out), "server is stopping") {
		t.Fatalf("a cell when the server stopped: %v", out)
	}
	srv.Restart()
	if out := send("again please"); !strings.Contains(fmt.Sprint(out["output"]), "back 42") {
		t.Fatalf("after the server came back: %v", out)
	}
}
