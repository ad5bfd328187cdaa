package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/server"
	"go.lsp.dev/jsonrpc2"
)

const harnessUsage = `usage: arbor harness ls|show|edit|rm|history|diff|rollback [--scope session|workspace|global] [--session ID] [--dir D]
  arbor harness ls [--kind K] [--json]
  arbor harness show KIND ID [--version V] [--json]
  arbor harness edit KIND ID [--title T] [--body B | --file F] [--base V]   (no --title/--body/--file: opens $EDITOR)
  arbor harness rm KIND ID [--base V]
  arbor harness history [KIND ID] [--json]
  arbor harness diff KIND ID FROM [TO]
  arbor harness rollback KIND ID VERSION
KIND is note, memory, skill or subagent.`

// cmdHarness reads and edits the continual harness through the daemon, as the user.
func cmdHarness(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		return errors.New(harnessUsage)
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("harness "+sub, flag.ContinueOnError)
	scope := fs.String("scope", "workspace", "session, workspace (this repository) or global (yours)")
	session := fs.String("session", "", "the session whose scope --scope session is")
	dir := fs.String("dir", ".", "a directory inside the repository")
	var h harnessCmd
	switch sub {
	case "ls", "list":
		h.kind = fs.String("kind", "", "only this kind")
	case "show":
		h.version = fs.String("version", "", "as it was at this version")
	case "edit":
		h.title = fs.String("title", "", "set the title")
		h.body = fs.String("body", "", "set the body (a skill's doc, a subagent's instructions)")
		h.file = fs.String("file", "", "the whole entry as the editor shows it, from a file (- for stdin)")
		h.base = fs.String("base", "", "the version your edit is based on (default: the one read now)")
	case "rm":
		h.base = fs.String("base", "", "the version you read (default: the current one)")
	case "history", "diff", "rollback":
	default:
		return fmt.Errorf("unknown harness command %q\n%s", sub, harnessUsage)
	}
	h.json = fs.Bool("json", false, "as JSON")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if *scope == "workspace" || *scope == "" {
		if *dir, err = absDir(*dir); err != nil {
			return err
		}
	} else {
		*dir = ""
	}
	// KIND is checked here, so a typo is named before the daemon is asked; "notes" means "note".
	if sub != "ls" && sub != "list" && len(pos) > 0 {
		k, err := harness.ParseKind(pos[0])
		if err != nil {
			return err
		}
		pos[0] = string(k)
	}
	h.scope = server.HarnessScope{Dir: *dir, Scope: *scope, Session: *session}
	h.setFlags = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { h.setFlags[f.Name] = true })
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	h.c = c
	switch sub {
	case "ls", "list":
		return h.ls(ctx, pos)
	case "show":
		return h.show(ctx, pos)
	case "edit":
		return h.edit(ctx, pos)
	case "rm":
		return h.rm(ctx, pos)
	case "history":
		return h.history(ctx, pos)
	case "diff":
		return h.diff(ctx, pos)
	}
	return h.rollback(ctx, pos)
}

type harnessCmd struct {
	c                                *server.Client
	scope                            server.HarnessScope
	kind, version, title, body, file *string
	base                             *string
	json                             *bool
	setFlags                         map[string]bool
}

func (h *harnessCmd) ls(ctx context.Context, pos []string) error {
	if len(pos) != 0 {
		return errors.New("usage: arbor harness ls [--scope S] [--kind K] [--json]")
	}
	res, err := server.HarnessList.Call(ctx, h.c, server.HarnessListParams{HarnessScope: h.scope, Kind: *h.kind})
	if err != nil {
		return err
	}
	if *h.json {
		return printJSON(res.Entries)
	}
	if len(res.Entries) == 0 {
		fmt.Printf("the %s harness has no entries (%s)\n", res.Scope, res.Ref)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tVERSION\tTITLE")
	for _, e := range res.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Kind, e.ID, short(e.Version), e.Title)
	}
	return tw.Flush()
}

func (h *harnessCmd) show(ctx context.Context, pos []string) error {
	if len(pos) != 2 {
		return errors.New("usage: arbor harness show KIND ID [--version V] [--json]")
	}
	e, err := server.HarnessGet.Call(ctx, h.c, server.HarnessGetParams{HarnessScope: h.scope, Kind: pos[0], ID: pos[1], Version: *h.version})
	if err != nil {
		return err
	}
	if *h.json {
		return printJSON(e)
	}
	_, err = os.Stdout.Write(entryText(e))
	return err
}

func (h *harnessCmd) edit(ctx context.Context, pos []string) error {
	if len(pos) != 2 {
		return errors.New("usage: arbor harness edit KIND ID [--title T] [--body B | --file F] [--base V]")
	}
	if h.setFlags["body"] && h.setFlags["file"] {
		return errors.New("--body and --file both set the content: give one")
	}
	cur, err := server.HarnessGet.Call(ctx, h.c, server.HarnessGetParams{HarnessScope: h.scope, Kind: pos[0], ID: pos[1]})
	var rpcErr *jsonrpc2.Error
	switch {
	case errors.As(err, &rpcErr) && rpcErr.Code == server.CodeNotFound:
		cur = &server.HarnessEntry{Kind: pos[0], ID: pos[1]} // a new entry
	case err != nil:
		return err
	}
	base := cur.Version
	if h.setFlags["base"] {
		base = *h.base
	}
	e := *cur
	e.Version = ""
	var kept string // the user's edited file, kept when the edit cannot be stored
	switch {
	case h.setFlags["file"]:
		data, err := readInput(*h.file)
		if err != nil {
			return err
		}
		if e, err = parseEntryText(e, data); err != nil {
			return fmt.Errorf("%s: %w", *h.file, err)
		}
	case h.setFlags["title"] || h.setFlags["body"]:
	default:
		if e, kept, err = editInEditor(e); err != nil || kept == "" {
			return err
		}
	}
	if h.setFlags["title"] {
		e.Title = *h.title
	}
	if h.setFlags["body"] {
		switch {
		case e.Kind == string(harness.Subagent):
			if e.Spec == nil {
				e.Spec = &server.HarnessSpec{}
			}
			e.Spec.Instructions = *h.body
		default:
			e.Body = *h.body
		}
	}
	if e.Title == "" && cur.Version == "" && !h.setFlags["title"] {
		e.Title = e.ID // a new entry made from flags alone is titled by its id
	}
	res, err := server.HarnessPut.Call(ctx, h.c, server.HarnessPutParams{HarnessScope: h.scope, Entry: e, Base: base})
	if err != nil {
		if kept != "" {
			return fmt.Errorf("%w\nyour edit is kept in %s", err, kept)
		}
		return err
	}
	if kept != "" {
		os.Remove(kept)
	}
	switch {
	case res.Unchanged:
		fmt.Printf("%s %s unchanged (version %s)\n", e.Kind, e.ID, short(res.Version))
	case base == "":
		fmt.Printf("created %s %s: version %s\n", e.Kind, e.ID, short(res.Version))
	default:
		fmt.Printf("updated %s %s: version %s\n", e.Kind, e.ID, short(res.Version))
	}
	return nil
}

func (h *harnessCmd) rm(ctx context.Context, pos []string) error {
	if len(pos) != 2 {
		return errors.New("usage: arbor harness rm KIND ID [--base V]")
	}
	base := *h.base
	if !h.setFlags["base"] {
		cur, err := server.HarnessGet.Call(ctx, h.c, server.HarnessGetParams{HarnessScope: h.scope, Kind: pos[0], ID: pos[1]})
		if err != nil {
			return err
		}
		base = cur.Version
	}
	res, err := server.HarnessDelete.Call(ctx, h.c, server.HarnessDeleteParams{HarnessScope: h.scope, Kind: pos[0], ID: pos[1], Base: base})
	if err != nil {
		return err
	}
	fmt.Printf("deleted %s %s: version %s (arbor harness rollback %s %s %s restores it)\n", pos[0], pos[1], short(res.Version), pos[0], pos[1], short(base))
	return nil
}

func (h *harnessCmd) history(ctx context.Context, pos []string) error {
	if len(pos) != 0 && len(pos) != 2 {
		return errors.New("usage: arbor harness history [KIND ID] [--json]")
	}
	p := server.HarnessHistoryParams{HarnessScope: h.scope}
	if len(pos) == 2 {
		p.Kind, p.ID = pos[0], pos[1]
	}
	res, err := server.HarnessHistory.Call(ctx, h.c, p)
	if err != nil {
		return err
	}
	if *h.json {
		return printJSON(res.Versions)
	}
	for _, v := range res.Versions {
		ch := v.Change
		fmt.Printf("%s  %s  %-6s  %s\n", short(v.Commit), v.Time.Local().Format("2006-01-02 15:04"), ch.Author, v.Subject)
		var why []string
		if ch.Session != "" {
			why = append(why, "session "+ch.Session)
		}
		if ch.Turn > 0 {
			why = append(why, fmt.Sprintf("turn %d", ch.Turn))
		}
		if len(ch.Trigger) > 0 {
			why = append(why, fmt.Sprintf("trigger %v", ch.Trigger))
		}
		if len(why) > 0 {
			fmt.Printf("    %s\n", strings.Join(why, ", "))
		}
		if ch.Intended != "" {
			fmt.Printf("    intended: %s\n", ch.Intended)
		}
		if ch.Observed != "" {
			fmt.Printf("    observed: %s\n", ch.Observed)
		}
	}
	return nil
}

func (h *harnessCmd) diff(ctx context.Context, pos []string) error {
	if len(pos) != 3 && len(pos) != 4 {
		return errors.New("usage: arbor harness diff KIND ID FROM [TO]")
	}
	p := server.HarnessDiffParams{HarnessScope: h.scope, Kind: pos[0], ID: pos[1], From: pos[2]}
	if len(pos) == 4 {
		p.To = pos[3]
	}
	res, err := server.HarnessDiff.Call(ctx, h.c, p)
	if err != nil {
		return err
	}
	if *h.json {
		return printJSON(res)
	}
	fmt.Print(res.Patch)
	return nil
}

func (h *harnessCmd) rollback(ctx context.Context, pos []string) error {
	if len(pos) != 3 {
		return errors.New("usage: arbor harness rollback KIND ID VERSION")
	}
	res, err := server.HarnessRollback.Call(ctx, h.c, server.HarnessRollbackParams{HarnessScope: h.scope, Kind: pos[0], ID: pos[1], Version: pos[2]})
	if err != nil {
		return err
	}
	if res.Unchanged {
		fmt.Printf("%s %s is already as it was at %s (version %s)\n", pos[0], pos[1], pos[2], short(res.Version))
		return nil
	}
	fmt.Printf("rolled back %s %s to %s: version %s\n", pos[0], pos[1], pos[2], short(res.Version))
	return nil
}

func short(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

func readInput(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// skillModuleLine separates a skill's doc from its module in the text the editor shows.
func skillModuleLine(id string) string { return "----- " + id + ".py -----" }

// entryText is an entry as one file to read or edit: a note or memory as its markdown
// ("# title\n\nbody", exactly as the store holds it), a skill as its SKILL.md then its module
// after a separator line, a subagent as its JSON.
func entryText(e *server.HarnessEntry) []byte {
	md := "# " + e.Title + "\n\n" + strings.TrimRight(e.Body, "\n") + "\n"
	switch {
	case e.Kind == string(harness.Skill):
		return []byte(md + "\n" + skillModuleLine(e.ID) + "\n" + e.Module)
	case e.Kind == string(harness.Subagent):
		spec := server.HarnessSpec{}
		if e.Spec != nil {
			spec = *e.Spec
		}
		b, _ := json.MarshalIndent(struct {
			Title string `json:"title"`
			server.HarnessSpec
		}{e.Title, spec}, "", "  ")
		return append(b, '\n')
	}
	return []byte(md)
}

// parseEntryText reads entryText back into e.
func parseEntryText(e server.HarnessEntry, data []byte) (server.HarnessEntry, error) {
	s := string(data)
	if e.Kind == string(harness.Subagent) {
		var v struct {
			Title string `json:"title"`
			server.HarnessSpec
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return e, fmt.Errorf("a subagent is JSON with title, instructions, model and maxTurnSteps: %w", err)
		}
		e.Title, e.Spec = v.Title, &v.HarnessSpec
		return e, nil
	}
	if e.Kind == string(harness.Skill) {
		sep := "\n" + skillModuleLine(e.ID) + "\n"
		doc, mod, ok := strings.Cut(s, sep)
		if !ok {
			return e, fmt.Errorf("a skill is its doc, then a line %q, then its module", skillModuleLine(e.ID))
		}
		s, e.Module = doc, mod
	}
	first, rest, _ := strings.Cut(s, "\n")
	title, ok := strings.CutPrefix(first, "# ")
	if !ok {
		return e, errors.New(`the first line must be the title, as "# title"`)
	}
	e.Title = strings.TrimSpace(title)
	e.Body = strings.TrimRight(strings.TrimLeft(rest, "\n"), "\n")
	return e, nil
}

// editInEditor opens the entry in $VISUAL or $EDITOR and reads it back. The file is kept (its
// path returned) so an edit the daemon refuses is not lost; "" means the user changed nothing.
func editInEditor(e server.HarnessEntry) (server.HarnessEntry, string, error) {
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	ext := ".md"
	switch {
	case e.Kind == string(harness.Subagent):
		ext = ".json"
	case e.Kind == string(harness.Skill):
		ext = ".py.md"
	}
	f, err := os.CreateTemp("", "arbor-harness-"+e.ID+"-*"+ext)
	if err != nil {
		return e, "", err
	}
	orig := entryText(&e)
	if e.Title == "" && e.Kind != string(harness.Subagent) {
		orig = []byte(strings.Replace(string(orig), "# \n", "# title\n", 1))
	}
	_, err = f.Write(orig)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return e, "", err
	}
	// Through the shell, as git runs it, so EDITOR="code --wait" works.
	cmd := exec.Command("sh", "-c", editor+` "$1"`, editor, f.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return e, "", fmt.Errorf("editor %s: %w (your edit, if any, is in %s)", editor, err, f.Name())
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return e, "", err
	}
	if bytes.Equal(data, orig) {
		os.Remove(f.Name())
		fmt.Printf("%s %s: no change\n", e.Kind, e.ID)
		return e, "", nil
	}
	out, err := parseEntryText(e, data)
	if err != nil {
		return e, "", fmt.Errorf("%w\nyour edit is kept in %s", err, filepath.Clean(f.Name()))
	}
	return out, f.Name(), nil
}
