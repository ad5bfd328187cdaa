package kernel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// A kernel's requests nested past the limit are refused by depth before they are decoded:
// with their id when it can be found, else with a reply that names the reason; the connection
// goes on.
func TestBridgeRefusesDeepRequests(t *testing.T) {
	b, err := newBridge(t.TempDir(), &recordingHost{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	c, err := net.Dial("unix", b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	fmt.Fprintf(c, `{"token":%q}`+"\n", b.token)
	reply := func() (id, msg string) {
		t.Helper()
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("no reply: %v", err)
		}
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *bridgeError    `json:"error"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("reply %q: %v", line, err)
		}
		if r.Error == nil {
			return string(r.ID), ""
		}
		return string(r.ID), r.Error.Message
	}
	const want = "JSON nesting depth 1001 at byte"
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	fmt.Fprintf(c, `{"id":7,"method":"ping","params":{"payload":%s}}`+"\n", deep)
	if id, msg := reply(); id != "7" || !strings.Contains(msg, want) || !strings.Contains(msg, "limit of 1000") {
		t.Errorf("5,000 nested arrays: reply id %s %q, want id 7 and an error containing %q", id, msg, want)
	}
	fmt.Fprintf(c, "%s\n", strings.Repeat(`{"a":`, 600_000)) // 3 MB, no id to be found
	if id, msg := reply(); id != "null" || !strings.Contains(msg, want) {
		t.Errorf("3 MB of nested objects: reply id %s %q, want a null id and an error containing %q", id, msg, want)
	}
	fmt.Fprintf(c, `{"id":8,"method":"ping","params":{"payload":"still here"}}`+"\n")
	if id, msg := reply(); id != "8" || msg != "" {
		t.Errorf("ping after the refusals: id %s error %q", id, msg)
	}
}

// From a real cell: a payload nested past the limit (Python's json needs a raised recursion
// limit to write one) fails the call with the reason, and the kernel's bridge still works.
func TestBridgeDeepRequestFromCell(t *testing.T) {
	k := startKernel(t, Options{Host: &recordingHost{}})
	res := run(t, k, "import sys, arbor_runtime\nsys.setrecursionlimit(100000)\nv = 1\nfor _ in range(5000):\n    v = [v]\n"+
		"try:\n    await arbor_runtime.call('ping', {'payload': v})\nexcept arbor_runtime.ArborError as e:\n    print('refused:', e)\n"+
		"print(await arbor_ping('after'))")
	if res.Status != StatusOK || !strings.Contains(res.Text, "refused: request refused: JSON nesting depth 1001") || !strings.Contains(res.Text, "after") {
		t.Errorf("→ %s %q, want the call refused by depth and a ping after it answered", res.Status, res.Text)
	}
}
