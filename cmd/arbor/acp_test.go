package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// acpClient is an ACP client (an editor) on the SDK's client side: it records every update in
// order, answers permission requests as told and writes files it is asked to, as an editor
// saving a buffer would.
type acpClient struct {
	t    *testing.T
	mu   sync.Mutex
	ups  []sdk.SessionNotification
	wake chan struct{}

	permit  string // the option to select; "" cancels the request
	asked   []sdk.RequestPermissionRequest
	written []sdk.WriteTextFileRequest
}

func (c *acpClient) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	c.mu.Lock()
	c.ups = append(c.ups, n)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

func (c *acpClient) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.asked = append(c.asked, p)
	opt := c.permit
	c.mu.Unlock()
	if opt == "" {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(opt))}, nil
}

func (c *acpClient) WriteTextFile(ctx context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	c.mu.Lock()
	c.written = append(c.written, p)
	c.mu.Unlock()
	return sdk.WriteTextFileResponse{}, os.WriteFile(p.Path, []byte(p.Content), 0o644)
}

func (c *acpClient) ReadTextFile(ctx context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	b, err := os.ReadFile(p.Path)
	return sdk.ReadTextFileResponse{Content: string(b)}, err
}

func (c *acpClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errors.New("no terminals")
}
func (c *acpClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errors.New("no terminals")
}
func (c *acpClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errors.New("no terminals")
}
func (c *acpClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errors.New("no terminals")
}
func (c *acpClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errors.New("no terminals")
}

// since returns the updates recorded from index i on.
func (c *acpClient) since(i int) []sdk.SessionNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sdk.SessionNotification(nil), c.ups[min(i, len(c.ups)):]...)
}

func (c *acpClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ups)
}

// waitFor waits until an update from index i on satisfies ok.
func (c *acpClient) waitFor(what string, i int, ok func(sdk.SessionNotification) bool) {
	c.t.Helper()
	deadline := time.After(hangGuard)
	for {
		for _, n := range c.since(i) {
			if ok(n) {
				return
			}
		}
		select {
		case <-c.wake:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			c.t.Fatalf("no update %s", what)
		}
	}
}

// acpProc is one `arbor acp` process with its client connection.
type acpProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	conn *sdk.ClientSideConnection
	cl   *acpClient
}

func (e *env) startACP() *acpProc {
	e.t.Helper()
	cmd := exec.Command(arborBin, "acp")
	cmd.Dir = e.repo
	cmd.Env = e.environ()
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	cl := &acpClient{t: e.t, wake: make(chan struct{}, 1), permit: "apply"}
	p := &acpProc{cmd: cmd, in: in, conn: sdk.NewClientSideConnection(cl, in, out), cl: cl}
	e.t.Cleanup(p.stop)
	return p
}

// stop closes the client's end (the editor going away) and waits for the process.
func (p *acpProc) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

func (p *acpProc) initialize(t *testing.T) sdk.InitializeResponse {
	t.Helper()
	res, err := p.conn.Initialize(ctxT(t), sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{Fs: sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}},
		ClientInfo:         &sdk.Implementation{Name: "arbor-test", Version: "1"}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func text(s string) []sdk.ContentBlock { return []sdk.ContentBlock{sdk.TextBlock(s)} }

// acpErr is the ACP error a call failed with.
func acpErr(t *testing.T, err error) *sdk.RequestError {
	t.Helper()
	var re *sdk.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("want an ACP error, got %v", err)
	}
	return re
}

func kinds(ns []sdk.SessionNotification) []string {
	var out []string
	for _, n := range ns {
		u := n.Update
		switch {
		case u.ToolCall != nil:
			out = append(out, "tool_call:"+string(u.ToolCall.Status))
		case u.ToolCallUpdate != nil:
			st := ""
			if u.ToolCallUpdate.Status != nil {
				st = string(*u.ToolCallUpdate.Status)
			}
			out = append(out, "tool_call_update:"+st)
		case u.AgentMessageChunk != nil:
			out = append(out, "agent_message_chunk")
		case u.AgentThoughtChunk != nil:
			out = append(out, "agent_thought_chunk")
		case u.UserMessageChunk != nil:
			out = append(out, "user_message_chunk")
		case u.Plan != nil:
			out = append(out, "plan")
		case u.CurrentModeUpdate != nil:
			out = append(out, "current_mode_update")
		default:
			out = append(out, "other")
		}
	}
	return out
}

func blockText(c sdk.ContentBlock) string {
	if c.Text != nil {
		return c.Text.Text
	}
	return ""
}

func toolText(cs []sdk.ToolCallContent) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Content != nil {
			b.WriteString(blockText(c.Content.Content))
		}
	}
	return b.String()
}

// The ACP flow end to end through the real `arbor acp` and daemon on the scripted model: the
// protocol version is negotiated (an old one refused with the one spoken), a session opens on
// its own branch (MCP servers declined by name, a cwd outside git refused), a prompt's cell
// that edits a file and spawns a child streams as a tool call with its updates in order and
// the child as a plan entry, the change is applied after permission and written through the
// client, a refusal and the content Arbor cannot take are told apart, a long cell is
// cancelled with the session kept, an editor that goes away mid-turn leaves the turn running
// and a new process loads its whole history, and list, fork and set_model work.
func TestACPFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.startACP()
	ctx := ctxT(t)

	_, err := p.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 0})
	if re := acpErr(t, err); !strings.Contains(re.Message, "version 0 is not spoken here: Arbor speaks version 1") {
		t.Fatalf("protocol version 0: %v", re)
	}
	init := p.initialize(t)
	if init.ProtocolVersion != 1 || !init.AgentCapabilities.LoadSession || init.AgentCapabilities.SessionCapabilities.List == nil ||
		init.AgentCapabilities.SessionCapabilities.Fork == nil || init.AgentCapabilities.PromptCapabilities.Image {
		t.Fatalf("initialize: %+v", init)
	}

	// Bad cwds.
	_, err = p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: "relative/dir", McpServers: []sdk.McpServer{}})
	if re := acpErr(t, err); !strings.Contains(re.Message, "not an absolute path") {
		t.Fatalf("relative cwd: %v", re)
	}
	outside := t.TempDir()
	_, err = p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: outside, McpServers: []sdk.McpServer{}})
	if re := acpErr(t, err); !strings.Contains(re.Message, "git repository") {
		t.Fatalf("cwd outside git: %v", re)
	}

	ns, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: e.repo, McpServers: []sdk.McpServer{
		{Stdio: &sdk.McpServerStdio{Name: "filesystem", Command: "mcp-fs", Args: []string{}, Env: []sdk.EnvVariable{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := string(ns.SessionId)
	meta, _ := ns.Meta["arbor"].(map[string]any)
	if ns.Modes == nil || ns.Modes.CurrentModeId != "review" || ns.Models == nil || ns.Models.CurrentModelId != "scripted" ||
		meta == nil || !strings.HasPrefix(fmt.Sprint(meta["branch"]), "arbor/session-") || !strings.Contains(fmt.Sprint(meta["mcpServersDeclined"]), "filesystem") {
		t.Fatalf("session/new: %+v", ns)
	}
	if s := e.session(id); s.State != "idle" {
		t.Fatalf("a new ACP session is %s, want idle", s.State)
	}

	// One turn: a cell that edits calc.py and spawns a child.
	mark := p.cl.count()
	start := time.Now()
	res, err := p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp edit: document add, and count in a helper")})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %s", res.StopReason)
	}
	ups := p.cl.since(mark)
	seq := kinds(ups)
	// In order: the declined MCP servers are told first; the cell's call starts, its updates
	// follow with a status that only moves forward (pending, in progress, completed — an
	// update a later one superseded while the client read may be folded into it); the child
	// shows as a plan entry; the answer comes after the cell completed.
	if len(seq) == 0 || seq[0] != "agent_thought_chunk" {
		t.Fatalf("updates %v", seq)
	}
	rank := map[sdk.ToolCallStatus]int{sdk.ToolCallStatusPending: 0, sdk.ToolCallStatusInProgress: 1, sdk.ToolCallStatusCompleted: 2, sdk.ToolCallStatusFailed: 2}
	cellID, last, completedAt, answerAt, planAt := sdk.ToolCallId(""), -1, -1, -1, -1
	for i, n := range ups {
		u := n.Update
		switch {
		case u.ToolCall != nil && u.ToolCall.Kind == sdk.ToolKindExecute && cellID == "":
			cellID, last = u.ToolCall.ToolCallId, rank[u.ToolCall.Status]
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.ToolCallId == cellID:
			if st := u.ToolCallUpdate.Status; st != nil {
				if rank[*st] < last {
					t.Fatalf("the cell's status went back to %s: %v", *st, seq)
				}
				last = rank[*st]
				if *st == sdk.ToolCallStatusCompleted {
					completedAt = i
				}
			}
		case u.ToolCallUpdate != nil && cellID == "":
			t.Fatalf("a tool_call_update before its tool_call: %v", seq)
		case u.Plan != nil && planAt < 0:
			planAt = i
		case u.AgentMessageChunk != nil && answerAt < 0:
			answerAt = i
		}
	}
	if cellID == "" || completedAt < 0 || planAt < 0 || answerAt < completedAt {
		t.Fatalf("updates in order: cell %q completed at %d, plan at %d, answer at %d: %v", cellID, completedAt, planAt, answerAt, seq)
	}
	var cellCode, cellOut, planText, answer string
	for _, n := range ups {
		u := n.Update
		if u.ToolCall != nil && u.ToolCall.Kind == sdk.ToolKindExecute {
			cellCode = toolText(u.ToolCall.Content)
		}
		if u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil && *u.ToolCallUpdate.Status == sdk.ToolCallStatusCompleted && strings.Contains(string(u.ToolCallUpdate.ToolCallId), "@") {
			cellOut = toolText(u.ToolCallUpdate.Content)
		}
		if u.Plan != nil {
			for _, pe := range u.Plan.Entries {
				planText += pe.Content + " [" + string(pe.Status) + "]\n"
			}
		}
		if u.AgentMessageChunk != nil {
			answer += blockText(u.AgentMessageChunk.Content)
		}
		if m, _ := n.Meta["arbor"].(map[string]any); m == nil || m["session"] != id {
			t.Fatalf("an update without _meta.arbor.session: %+v", n)
		}
	}
	if !strings.Contains(cellCode, "open('calc.py', 'w')") || !strings.Contains(cellOut, "edited calc.py and started") {
		t.Fatalf("the cell's tool call: code %q output %q", cellCode, cellOut)
	}
	if !strings.Contains(planText, "counter: acp child: count to three") {
		t.Fatalf("plan entries:\n%s", planText)
	}
	// The child's entry follows its state: it finishes, and the plan says so.
	p.cl.waitFor("with the child's plan entry completed", mark, func(n sdk.SessionNotification) bool {
		if n.Update.Plan == nil || len(n.Update.Plan.Entries) != 1 {
			return false
		}
		pe := n.Update.Plan.Entries[0]
		m, _ := pe.Meta["arbor"].(map[string]any)
		return pe.Status == sdk.PlanEntryStatusCompleted && m != nil && strings.HasPrefix(fmt.Sprint(m["branch"]), "arbor/acp-child")
	})
	if !strings.Contains(answer, "I documented add") {
		t.Fatalf("answer %q", answer)
	}
	tree, _ := res.Meta["arbor"].(map[string]any)
	if nodes, _ := tree["tree"].([]any); len(nodes) < 2 {
		t.Fatalf("the prompt's _meta.arbor.tree: %v", res.Meta)
	}
	// Permission was asked with the diff, granted, and the change written through the client.
	if len(p.cl.asked) != 1 {
		t.Fatalf("%d permission requests", len(p.cl.asked))
	}
	var diffPath string
	for _, c := range p.cl.asked[0].ToolCall.Content {
		if c.Diff != nil {
			diffPath = c.Diff.Path
			if !strings.Contains(c.Diff.NewText, "Sum of a and b") || c.Diff.OldText == nil {
				t.Fatalf("the permission's diff: %+v", c.Diff)
			}
		}
	}
	if diffPath != filepath.Join(e.repo, "calc.py") {
		t.Fatalf("the permission's diff is of %q", diffPath)
	}
	if len(p.cl.written) != 1 || p.cl.written[0].Path != filepath.Join(e.repo, "calc.py") || !strings.Contains(p.cl.written[0].Content, "Sum of a and b") {
		t.Fatalf("written through the client: %+v", p.cl.written)
	}
	if log := e.git(e.repo, "log", "--format=%s", "-1"); !strings.Contains(log, "arbor") {
		t.Fatalf("the user's branch has no accept commit: %s", log)
	}
	t.Logf("prompt → end of turn: %v", time.Since(start))

	// A refusal is told apart from an end of turn; content Arbor cannot take is declined by
	// name; an unknown session is named.
	res, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp refuse this")})
	if err != nil || res.StopReason != sdk.StopReasonRefusal {
		t.Fatalf("refusal: %v %v", res.StopReason, err)
	}
	_, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("look"), sdk.ImageBlock("aGk=", "image/png")}})
	if re := acpErr(t, err); re.Code != -32602 || !strings.Contains(re.Message, "image content cannot be taken") {
		t.Fatalf("an image: %v", re)
	}
	_, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: "nosuchsession", Prompt: text("acp hello")})
	if re := acpErr(t, err); re.Code != -32002 || !strings.Contains(re.Message, "nosuchsession") {
		t.Fatalf("an unknown session: %v", re)
	}

	// Permission refused: the change stays on the session branch.
	p.cl.mu.Lock()
	p.cl.permit = "keep"
	p.cl.mu.Unlock()
	before, _ := os.ReadFile(filepath.Join(e.repo, "calc.py"))
	if res, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp again: add sub")}); err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("acp again: %v %v", res.StopReason, err)
	}
	after, _ := os.ReadFile(filepath.Join(e.repo, "calc.py"))
	if len(p.cl.asked) != 2 || string(after) != string(before) {
		t.Fatalf("a refused change reached the user's tree (%d asks):\n%s", len(p.cl.asked), after)
	}
	if d := e.mustArbor("diff", id); !strings.Contains(d.stdout, "def sub") {
		t.Fatalf("the refused change is not on the session branch:\n%s", d)
	}
	// The kept change is not asked about again by a turn that changes nothing.
	if res, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp hello there")}); err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("acp hello: %v %v", res.StopReason, err)
	}
	if len(p.cl.asked) != 2 {
		t.Fatalf("asked %d times; a kept change was asked about again", len(p.cl.asked))
	}

	// Cancel a long cell: the prompt answers cancelled, the session stays and takes the next.
	if _, err := p.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: ns.SessionId, ModeId: "branch"}); err != nil {
		t.Fatal(err)
	}
	mark = p.cl.count()
	type answerT struct {
		res sdk.PromptResponse
		err error
	}
	got := make(chan answerT, 1)
	go func() {
		r, err := p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp long: print forever")})
		got <- answerT{r, err}
	}()
	p.cl.waitFor("with the long cell's output", mark, func(n sdk.SessionNotification) bool {
		u := n.Update.ToolCallUpdate
		return u != nil && strings.Contains(toolText(u.Content), "tick 3")
	})
	if err := p.conn.Cancel(ctx, sdk.CancelNotification{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		if a.err != nil || a.res.StopReason != sdk.StopReasonCancelled {
			t.Fatalf("cancelled prompt: %v %v", a.res.StopReason, a.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the cancelled prompt did not answer")
	}
	if res, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp hello again")}); err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("a prompt after the cancel: %v %v", res.StopReason, err)
	}

	// A prompt sent while another runs supersedes it: the first answers cancelled, its cell
	// ends failed (not left spinning), and the second runs.
	mark = p.cl.count()
	go func() {
		r, err := p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp long: again")})
		got <- answerT{r, err}
	}()
	p.cl.waitFor("with the second long cell's output", mark, func(n sdk.SessionNotification) bool {
		u := n.Update.ToolCallUpdate
		return u != nil && strings.Contains(toolText(u.Content), "tick 2")
	})
	if res, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp hello, superseding")}); err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("the superseding prompt: %v %v", res.StopReason, err)
	}
	if a := <-got; a.err != nil || a.res.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("the superseded prompt: %v %v", a.res.StopReason, a.err)
	}
	failedCell := false
	for _, n := range p.cl.since(mark) {
		if u := n.Update.ToolCallUpdate; u != nil && u.Status != nil && *u.Status == sdk.ToolCallStatusFailed && strings.Contains(toolText(u.Content), "interrupted") {
			failedCell = true
		}
	}
	if !failedCell {
		t.Fatalf("the interrupted cell was not ended: %v", kinds(p.cl.since(mark)))
	}

	// The editor goes away mid-turn: the turn goes on in the daemon, and a new process loads
	// the whole history, the finished cell included.
	mark = p.cl.count()
	go p.conn.Prompt(context.Background(), sdk.PromptRequest{SessionId: ns.SessionId, Prompt: text("acp slow: a cell that takes a while")})
	p.cl.waitFor("with the slow cell running", mark, func(n sdk.SessionNotification) bool {
		u := n.Update.ToolCallUpdate
		return u != nil && strings.Contains(toolText(u.Content), "slow start")
	})
	p.stop()
	deadline := time.Now().Add(hangGuard)
	for e.session(id).State != "idle" {
		if time.Now().After(deadline) {
			t.Fatal("the session did not finish its turn after the editor went away")
		}
		time.Sleep(200 * time.Millisecond)
	}
	p2 := e.startACP()
	p2.initialize(t)
	if _, err := p2.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: ns.SessionId, Cwd: e.repo, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	var users, answers []string
	slowDone := false
	for _, n := range p2.cl.since(0) {
		u := n.Update
		if u.UserMessageChunk != nil {
			users = append(users, blockText(u.UserMessageChunk.Content))
		}
		if u.AgentMessageChunk != nil {
			answers = append(answers, blockText(u.AgentMessageChunk.Content))
		}
		// Replayed faster than read, a cell's updates may be folded into its tool_call.
		if u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil && *u.ToolCallUpdate.Status == sdk.ToolCallStatusCompleted &&
			strings.Contains(toolText(u.ToolCallUpdate.Content), "slow done") ||
			u.ToolCall != nil && u.ToolCall.Status == sdk.ToolCallStatusCompleted && strings.Contains(toolText(u.ToolCall.Content), "slow done") {
			slowDone = true
		}
	}
	if len(users) < 6 || !strings.HasPrefix(users[0], "acp edit") || !strings.Contains(strings.Join(users, "|"), "acp slow") {
		t.Fatalf("the loaded history's user messages: %q\n%s", users, e.arbor("log", id).stdout)
	}
	if !slowDone || !strings.Contains(strings.Join(answers, ""), "the slow cell finished") {
		t.Fatalf("the loaded history lacks the turn finished after the editor left (slow done %v): %q", slowDone, answers)
	}

	// List, fork at an event, set_model.
	cwd := e.repo
	list, err := p2.conn.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &cwd})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list.Sessions {
		if string(s.SessionId) == id && s.Title != nil && strings.HasPrefix(*s.Title, "acp edit") {
			found = true
		}
	}
	if !found {
		t.Fatalf("session/list lacks %s: %+v", id, list.Sessions)
	}
	var forkAt float64
	for _, n := range p2.cl.since(0) {
		if n.Update.AgentMessageChunk != nil && strings.Contains(blockText(n.Update.AgentMessageChunk.Content), "I documented add") {
			forkAt = n.Meta["arbor"].(map[string]any)["seq"].(float64)
		}
	}
	fk, err := p2.conn.UnstableForkSession(ctx, sdk.UnstableForkSessionRequest{SessionId: ns.SessionId, Cwd: e.repo,
		Meta: map[string]any{"arbor": map[string]any{"atSeq": forkAt}}})
	if err != nil {
		t.Fatal(err)
	}
	if fk.SessionId == ns.SessionId || e.session(string(fk.SessionId)).Branch == e.session(id).Branch {
		t.Fatalf("fork: %+v", fk)
	}
	fm, _ := fk.Meta["arbor"].(map[string]any)
	if fm["forkSeq"] != forkAt {
		t.Fatalf("forked at %v, asked %v", fm["forkSeq"], forkAt)
	}
	if res, err = p2.conn.Prompt(ctx, sdk.PromptRequest{SessionId: fk.SessionId, Prompt: text("acp hello fork")}); err != nil || res.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("a prompt on the fork: %v %v", res.StopReason, err)
	}
	// Loading the fork replays its source's conversation up to the fork point, then its own.
	mark = p2.cl.count()
	if _, err := p2.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: fk.SessionId, Cwd: e.repo, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	var forkUsers []string
	for _, n := range p2.cl.since(mark) {
		if u := n.Update.UserMessageChunk; u != nil {
			forkUsers = append(forkUsers, blockText(u.Content))
		}
	}
	if len(forkUsers) != 2 || !strings.HasPrefix(forkUsers[0], "acp edit") || forkUsers[1] != "acp hello fork" {
		t.Fatalf("the fork's loaded user messages: %q", forkUsers)
	}

	// A turn this connection did not start (sent from the CLI) is cancelled from it too.
	cancels := strings.Count(e.arbor("log", id).stdout, "interrupted: cancelled by the user")
	e.mustArbor("send", id, "acp slow: from the CLI")
	deadline = time.Now().Add(hangGuard)
	for strings.Count(e.arbor("log", id).stdout, "slow start") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the CLI's slow cell did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p2.conn.Cancel(ctx, sdk.CancelNotification{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}
	for strings.Count(e.arbor("log", id).stdout, "interrupted: cancelled by the user") == cancels {
		if time.Now().After(deadline) {
			t.Fatal("session/cancel did not stop a turn the connection had not started")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = p2.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: ns.SessionId, ModelId: "gpt-nope"})
	if re := acpErr(t, err); !strings.Contains(re.Message, `unknown model "gpt-nope"`) || !strings.Contains(re.Message, "scripted") {
		t.Fatalf("set_model to an unknown model: %v", re)
	}
	if _, err := p2.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: ns.SessionId, ModelId: "scripted"}); err != nil {
		t.Fatal(err)
	}
}

// Malformed frames and a handler's bad params do not end the agent: it answers the next
// request. (An unparseable line is dropped by the SDK; a request with bad params is answered
// with invalid params.)
func TestACPBadFrames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := exec.Command(arborBin, "acp")
	cmd.Dir, cmd.Env = e.repo, e.environ()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	dec := json.NewDecoder(out)
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(`{not json`)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"one"}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"session/nope","params":{}}`)
	send(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}`)
	got := map[float64]map[string]any{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(got) < 3 {
			var m map[string]any
			if dec.Decode(&m) != nil {
				return
			}
			if id, ok := m["id"].(float64); ok {
				got[id] = m
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("answers so far: %v", got)
	}
	if e1, _ := got[1]["error"].(map[string]any); e1 == nil || e1["code"] != float64(-32602) {
		t.Fatalf("bad params: %v", got[1])
	}
	if e2, _ := got[2]["error"].(map[string]any); e2 == nil || e2["code"] != float64(-32601) {
		t.Fatalf("unknown method: %v", got[2])
	}
	if r3, _ := got[3]["result"].(map[string]any); r3 == nil || r3["protocolVersion"] != float64(1) {
		t.Fatalf("initialize after bad frames: %v", got[3])
	}
}
