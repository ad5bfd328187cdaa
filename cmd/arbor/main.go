// Command arbor is the Arbor daemon, its editor forwarder, and its command line.
//
// Run `arbor help` for the commands. Everything but flag parsing and wiring lives in the
// packages: server (protocol, daemon, forwarder), agents (sessions), kernel, gitstate.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const version = "0.1.0"

type command struct {
	name, args, help string
	run              func(ctx context.Context, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"run", `"task" [--model M] [--profile P] [--detach] [--dir D] [--autonomous --until CMD [--max-turns N --max-tokens N --max-wall D --max-cost USD]]`, "start a session in the current repository and stream it (--autonomous: until CMD passes)", cmdRun},
		{"ls", "[--json] [--all]", "list sessions of this repository (--all: every repository)", cmdLs},
		{"tree", "[--json]", "show the session tree with states and rolled-up usage", cmdTree},
		{"log", "ID [--json] [--follow]", "print a session's events (--follow until it settles)", cmdLog},
		{"diff", "ID [--stat] [--json] [--turn N] [--all]", "what remains to review of a session's change (all: also what was accepted; turn: one turn's)", cmdDiff},
		{"fork", "ID [--at SEQ] [--name N]", "a new session from a session's history up to event SEQ, on its own branch", cmdFork},
		{"accept", "ID [--files a,b] [--hunk path#i ...] [--merge] [--head H]", "commit a session's change (or part) onto your current branch", cmdAccept},
		{"reject", "ID [--files a,b] [--hunk path#i ...] [--head H]", "revert a session's remaining change (or part) on its own branch; it is told", cmdReject},
		{"merge", "ID [--resolved DIR] [--take path=ours|theirs]", "merge a subagent's branch into its parent session's worktree", cmdMerge},
		{"discard", "ID [--force]", "stop a session and remove its worktree; unmerged work is archived unless --force", cmdDiscard},
		{"send", `ID "text" [--mode auto|steer|follow_up]`, "send a message to a session", cmdSend},
		{"stop", "ID", "stop a session and its subagents", cmdStop},
		{"daemon", "[stop|status] [flags]", "run the daemon (or stop it, or show its status)", cmdDaemon},
		{"lsp", "", "stdio forwarder for editors; starts the daemon when needed", cmdLSP},
		{"acp", "[--verbose]", "an Agent Client Protocol agent on stdio (Zed, JetBrains, CodeCompanion, avante.nvim); starts the daemon when needed", cmdACP},
		{"fake-model", "--script FILE [--addr 127.0.0.1:0]", "serve a scripted OpenAI-compatible model", cmdFakeModel},
		{"demo", "[--keep]", "run a refactor on a throwaway repository with the built-in scripted model", cmdDemo},
		{"bench", "startup|kernel|git|agents|harness|longrun|tokens|acp [--json]", "measure against references in the same run", cmdBench},
		{"fsck", "[--repair] [DIR]", "check the event logs and harness stores of a repository's sessions", cmdFsck},
		{"harness", "ls|show|edit|rm|history|diff|rollback [--scope S]", "list, show, edit and roll back the harness's notes, memories, skills and subagents", cmdHarness},
		{"refine", "ID [--focus TEXT] [--scope S]", "ask a model to propose harness edits from what went wrong in a session", cmdRefine},
		{"proposals", "[PID] | accept PID | reject PID [--reason R]", "review harness proposals: list, show as a diff, accept or reject", cmdProposals},
		{"goal", `ID ["objective" [--budget tokens=N,turns=N,wall=D,cost=USD] [--until CMD] [--replace] | pause | resume | clear]`, "give a session a goal that keeps it working until met, out of budget or stalled", cmdGoal},
		{"progress", "ID [--json]", "a session's verified progress against its subtree's spending", cmdProgress},
		{"heartbeat", `ID "instruction" --every 10m | --cron "*/15 * * * *" | delete HID`, "send a session an instruction on a schedule (or delete a heartbeat)", cmdHeartbeat},
		{"heartbeats", "[ID] [--json]", "list heartbeats: schedule, next due, runs, pending", cmdHeartbeats},
		{"trust", "[DIR] [--yes] | --list | --revoke [DIR]", "review and trust the commands, interpreter, sandbox and key routing a repository's arbor.json sets", cmdTrust},
		{"profiles", "[DIR] [--json]", "list the profiles a run can use (arbor run --profile NAME) with their settings", cmdProfiles},
		{"eval", "run SUITE [--split heldout] [--harness REF] [--model M] [--repeat K] [--parallel N] | results [RUN] | compare A B | stop RUN", "measure a harness on a suite's tasks: verified success, claims, tokens, cost", cmdEval},
		{"version", "", "print the version", func(context.Context, []string) error { fmt.Println("arbor", version); return nil }},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		return
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			err := c.run(ctx, os.Args[2:])
			var ec exitCode
			if errors.As(err, &ec) {
				os.Exit(int(ec))
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "arbor %s: %v\n", c.name, err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "arbor: unknown command %q\n\n", os.Args[1])
	usage()
	os.Exit(2)
}

// exitCode ends the process with a status and no further message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func usage() {
	fmt.Fprintln(os.Stderr, "arbor — recursive coding agents on git branches, driven from your editor\n\nUsage:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  arbor %-10s %s\n      %s\n", c.name, c.args, c.help)
	}
	fmt.Fprintln(os.Stderr, "\nEnvironment: ARBOR_MODEL_BASE_URL, ARBOR_MODEL, ARBOR_API_KEY_ENV, ARBOR_KERNEL_PYTHON, ARBOR_SOCKET, ARBOR_STATE_DIR")
}
