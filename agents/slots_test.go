package agents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
)

// With maxRunning 1, a parent that waits for its child inside a cell (polling inbox) lends the
// child its running slot: otherwise the child never starts and the parent waits forever.
func TestWaitingParentLendsItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^report back","turn":1},"code":"await agent_message.send('hello parent', receiver_role='parent')"},
 {"when":{"task":"^report back"},"text":"sent"},
 {"when":{"task":"^wait","turn":1},"code":"import asyncio\nh = await rlm('report back', name='kid')\nmsgs = []\nfor _ in range(300):\n    msgs = await agent_message.inbox()\n    if msgs: break\n    await asyncio.sleep(0.05)\nprint('got', [m['text'] for m in msgs])"},
 {"when":{"task":"^wait"},"text":"ok"}
],"default":{"text":"done"}}`)
	if err := os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"maxRunning": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := e.create("wait for the child")
	e.settled(parent)
	outs := e.events(parent, event.TypeToolFinished)
	if len(outs) == 0 || !strings.Contains(fmt.Sprint(outs[0]["output"]), "got ['hello parent']") {
		t.Fatalf("the parent's cell did not hear from its child: %v", outs)
	}
	parent.mu.Lock()
	kids := append([]string(nil), parent.children...)
	parent.mu.Unlock()
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	kid, err := e.svc.Get(kids[0])
	if err != nil {
		t.Fatal(err)
	}
	e.settled(kid)
	// The slot came back: nobody holds one once both are idle.
	ws := parent.ws.slots
	ws.mu.Lock()
	n := len(ws.held)
	ws.mu.Unlock()
	if n != 0 {
		t.Errorf("%d slots still held after both settled", n)
	}
}
