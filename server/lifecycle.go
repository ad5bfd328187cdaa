package server

import (
	"context"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// Command ids for workspace/executeCommand and code actions.
const (
	CmdNewTask       = "arbor.newTask"
	CmdSpawnSubagent = "arbor.spawnSubagent"
	CmdStop          = "arbor.stop"
	CmdSend          = "arbor.send"
	CmdFork          = "arbor.fork"
	CmdAccept        = "arbor.accept"
	CmdDiscard       = "arbor.discard"
)

// CodeActionKind is the kind of Arbor's code actions.
const CodeActionKind protocol.CodeActionKind = "refactor.rewrite.arbor"

func (c *conn) initialize(ctx context.Context, p protocol.InitializeParams) (*protocol.InitializeResult, error) {
	c.mu.Lock()
	c.rootDir = rootOf(&p)
	if w := p.Capabilities.Window; w != nil {
		c.caps.WorkDoneProgress = w.WorkDoneProgress
	}
	c.mu.Unlock()
	return &protocol.InitializeResult{
		Capabilities: protocol.ServerCapabilities{
			CodeActionProvider: &protocol.CodeActionOptions{CodeActionKinds: []protocol.CodeActionKind{CodeActionKind}},
			ExecuteCommandProvider: &protocol.ExecuteCommandOptions{
				Commands: []string{CmdNewTask, CmdSpawnSubagent, CmdStop, CmdSend, CmdFork, CmdAccept, CmdDiscard},
			},
		},
		ServerInfo: &protocol.ServerInfo{Name: "arbor", Version: c.srv.opts.Version},
	}, nil
}

func (c *conn) shutdownReq(ctx context.Context, _ Empty) (*Empty, error) {
	c.mu.Lock()
	c.shutdown = true
	c.mu.Unlock()
	return nil, nil
}

// sendFullTree gives a newly initialized client every session of its workspace (or all).
func (c *conn) sendFullTree(ctx context.Context) {
	c.mu.Lock()
	dir := c.rootDir
	c.mu.Unlock()
	infos, err := c.srv.agents.List(dir)
	if err != nil {
		infos, _ = c.srv.agents.List("")
	}
	out := make([]Session, 0, len(infos))
	for _, in := range infos {
		out = append(out, toSession(in))
	}
	c.enqueue(outMsg{method: NotifySessionTree, params: &SessionTreeParams{Full: true, Sessions: out}}, 0)
}

// rootOf is the client's workspace: its first folder, else the deprecated rootUri and rootPath,
// which older clients (Neovim 0.7.2 among them) send instead.
func rootOf(p *protocol.InitializeParams) string {
	if len(p.WorkspaceFolders) > 0 {
		return uri.URI(p.WorkspaceFolders[0].URI).Filename()
	}
	//lint:ignore SA1019 read on purpose: older clients send these instead of workspaceFolders.
	rootURI, rootPath := p.RootURI, p.RootPath
	if rootURI != "" {
		return rootURI.Filename()
	}
	return rootPath
}
