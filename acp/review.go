package acp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/arborhq/arbor/server"
)

// What the permission request shows of a change: at most this many files as diffs, each side
// at most reviewFileSize and all of them at most reviewTotal (the rest are named in the
// summary), so no message comes near a client's line limit. writeFileSize bounds a file
// written through the client.
const (
	reviewFiles    = 20
	reviewFileSize = 256 << 10
	reviewTotal    = 1 << 20
	writeFileSize  = 1 << 20
)

const (
	optApply       = "apply"
	optApplyAlways = "apply-always"
	optKeep        = "keep"
	optKeepAlways  = "keep-always"
)

// review brings the session's remaining change to the user's branch as its mode says: asked
// first in review mode, at once in apply mode, never in branch mode. An accepted change is
// written through the client's fs/write_text_file when it offers that.
//
// work runs the daemon calls (never abandoned halfway: an accept is whole or not at all); ctx,
// the prompt's, is only the permission request's, so a cancel withdraws the question.
func (a *Agent) review(ctx, work context.Context, s *session) error {
	mode := a.state.get(s.id).Mode
	if mode == modeBranch {
		return nil
	}
	d, err := a.client(work)
	if err != nil {
		return err
	}
	info, err := server.SessionGet.Call(work, d, server.SessionRef{ID: s.id})
	if err != nil {
		return daemonErr("session", err)
	}
	diff, err := server.SessionDiff.Call(work, d, server.DiffParams{ID: s.id})
	if err != nil {
		return daemonErr("diff", err)
	}
	if len(diff.Files) == 0 {
		return nil
	}
	if mode == modeReview && a.state.get(s.id).Kept == diff.Head {
		return nil // the user kept exactly this change on the branch: asked once is enough
	}
	callID := sdk.ToolCallId(fmt.Sprintf("arbor-apply-%s-%d", short12(diff.Head), a.applies.Add(1)))
	summary := diffSummary(diff, info.Branch)
	content := []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(summary))}
	var locations []sdk.ToolCallLocation
	shown, total := 0, 0
	var left []string
	for _, f := range diff.Files {
		full := filepath.Join(info.Workspace, f.Path)
		locations = append(locations, sdk.ToolCallLocation{Path: full})
		if f.Binary {
			continue
		}
		if shown >= reviewFiles || total >= reviewTotal {
			left = append(left, f.Path)
			continue
		}
		oldText, newText, ok := a.sides(work, d, s.id, f)
		if !ok || total+len(oldText)+len(newText) > reviewTotal {
			left = append(left, f.Path)
			continue
		}
		shown++
		total += len(oldText) + len(newText)
		if f.Status == "added" {
			content = append(content, sdk.ToolDiffContent(full, newText))
		} else {
			content = append(content, sdk.ToolDiffContent(full, newText, oldText))
		}
	}
	if len(left) > 0 {
		content[0] = sdk.ToolContent(sdk.TextBlock(summary + fmt.Sprintf("(not shown here, too large or too many: %s — `arbor diff %s` shows them)\n", strings.Join(left, ", "), short(s.id))))
	}
	title := fmt.Sprintf("Apply %d file(s) from %s to your branch", len(diff.Files), info.Branch)
	s.push(sdk.StartToolCall(callID, title, sdk.WithStartKind(sdk.ToolKindEdit), sdk.WithStartStatus(sdk.ToolCallStatusPending),
		sdk.WithStartContent(content), sdk.WithStartLocations(locations)))
	if mode == modeReview {
		if err := a.out.flush(work); err != nil {
			return err
		}
		res, err := a.peer().RequestPermission(ctx, sdk.RequestPermissionRequest{
			SessionId: sdk.SessionId(s.id),
			ToolCall: sdk.ToolCallUpdate{ToolCallId: callID, Title: sdk.Ptr(title), Kind: sdk.Ptr(sdk.ToolKindEdit),
				Status: sdk.Ptr(sdk.ToolCallStatusPending), Content: content, Locations: locations},
			Options: []sdk.PermissionOption{
				{OptionId: optApply, Name: "Apply to your branch", Kind: sdk.PermissionOptionKindAllowOnce},
				{OptionId: optApplyAlways, Name: "Always apply (mode: apply)", Kind: sdk.PermissionOptionKindAllowAlways},
				{OptionId: optKeep, Name: "Keep it on " + info.Branch, Kind: sdk.PermissionOptionKindRejectOnce},
				{OptionId: optKeepAlways, Name: "Never ask (mode: branch)", Kind: sdk.PermissionOptionKindRejectAlways},
			},
			Meta: map[string]any{"arbor": map[string]any{"session": s.id, "branch": info.Branch, "head": diff.Head}},
		})
		choice := ""
		if err != nil {
			a.log.Warn("request permission", "session", s.id, "err", err)
		} else if res.Outcome.Selected != nil {
			choice = string(res.Outcome.Selected.OptionId)
		}
		switch choice {
		case optApplyAlways:
			a.setMode(s, modeApply)
		case optKeepAlways:
			a.setMode(s, modeBranch)
		}
		if choice != optApply && choice != optApplyAlways {
			if choice == optKeep {
				a.state.set(s.id, func(st *sessionState) { st.Kept = diff.Head })
			}
			why := "kept on " + info.Branch + " (not applied)"
			if err != nil || choice == "" {
				why = "not applied: the permission request was cancelled; the change stays on " + info.Branch
			}
			s.push(sdk.UpdateToolCall(callID, sdk.WithUpdateStatus(sdk.ToolCallStatusFailed),
				sdk.WithUpdateContent(append(content, sdk.ToolContent(sdk.TextBlock(why+". `arbor accept "+short(s.id)+"` applies it later."))))))
			return nil
		}
	}
	acc, err := server.SessionAccept.Call(work, d, server.AcceptParams{ID: s.id, Head: diff.Head, Accepted: &diff.Accepted})
	if err != nil {
		msg := daemonErr("accept", err).Error()
		var re *sdk.RequestError
		if e, ok := daemonErr("accept", err).(*sdk.RequestError); ok {
			re = e
			msg = re.Message
		}
		s.push(sdk.UpdateToolCall(callID, sdk.WithUpdateStatus(sdk.ToolCallStatusFailed),
			sdk.WithUpdateContent(append(content, sdk.ToolContent(sdk.TextBlock("not applied: "+msg))))))
		return nil
	}
	written, skipped := a.writeThrough(work, s, info.Workspace, acc.Files)
	done := fmt.Sprintf("applied as %s on your branch (%d file(s))", short12(acc.Commit), len(acc.Files))
	if written > 0 {
		done += fmt.Sprintf("; %d written through the editor", written)
	}
	if len(skipped) > 0 {
		done += "; not written through the editor: " + strings.Join(skipped, ", ")
	}
	s.push(sdk.UpdateToolCall(callID, sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted),
		sdk.WithUpdateContent(append(content, sdk.ToolContent(sdk.TextBlock(done)))),
		sdk.WithUpdateRawOutput(map[string]any{"commit": acc.Commit, "files": acc.Files})))
	return nil
}

// sides reads a file's text before and after the change, for a diff the client shows.
func (a *Agent) sides(ctx context.Context, d *server.Client, id string, f server.FileDiff) (oldText, newText string, ok bool) {
	if f.Status != "added" {
		r, err := server.SessionFileAt.Call(ctx, d, server.FileAtParams{ID: id, Path: cmpOr(f.OldPath, f.Path), Side: "base", MaxBytes: reviewFileSize})
		if err != nil || r.TooLarge {
			return "", "", false
		}
		oldText = r.Content
	}
	if f.Status != "deleted" {
		r, err := server.SessionFileAt.Call(ctx, d, server.FileAtParams{ID: id, Path: f.Path, Side: "head", MaxBytes: reviewFileSize})
		if err != nil || r.TooLarge {
			return "", "", false
		}
		newText = r.Content
	}
	return oldText, newText, true
}

// writeThrough writes each accepted file's new content through the client, so its open
// buffers take it (and their undo history has it). Deleted, binary and very large files are
// left to the disk, where the accept already put them.
func (a *Agent) writeThrough(ctx context.Context, s *session, root string, files []string) (written int, skipped []string) {
	if !a.clientCaps().Fs.WriteTextFile {
		return 0, nil
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return 0, nil
	}
	for _, f := range files {
		full := filepath.Join(root, f)
		// Only a regular file inside the repository: a symlink the change made (to ~/.ssh, say)
		// is never read and sent on, nor one under a symlinked directory.
		fi, err := os.Lstat(full)
		if err != nil {
			continue // deleted by the change
		}
		real, rerr := filepath.EvalSymlinks(full)
		if !fi.Mode().IsRegular() || rerr != nil || !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
			skipped = append(skipped, f+" (not a regular file in the repository)")
			continue
		}
		b, err := os.ReadFile(full)
		if err != nil {
			continue
		}
		if len(b) > writeFileSize || !utf8.Valid(b) {
			skipped = append(skipped, f)
			continue
		}
		if _, err := a.peer().WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: sdk.SessionId(s.id), Path: full, Content: string(b)}); err != nil {
			a.log.Warn("fs/write_text_file", "path", full, "err", err)
			skipped = append(skipped, f+" ("+err.Error()+")")
			continue
		}
		written++
	}
	return written, skipped
}

func (a *Agent) setMode(s *session, mode string) {
	a.state.set(s.id, func(st *sessionState) { st.Mode = mode })
	s.push(sdk.SessionUpdate{CurrentModeUpdate: &sdk.SessionCurrentModeUpdate{CurrentModeId: sdk.SessionModeId(mode)}})
}

// push sends an update of the session that no event carries.
func (s *session) push(u sdk.SessionUpdate) {
	s.a.out.push(sdk.SessionNotification{SessionId: sdk.SessionId(s.id), Update: u,
		Meta: map[string]any{"arbor": map[string]any{"session": s.id}}})
}

func diffSummary(d *server.DiffResult, branch string) string {
	var b strings.Builder
	adds, dels := 0, 0
	for _, f := range d.Files {
		adds += f.Additions
		dels += f.Deletions
	}
	fmt.Fprintf(&b, "%d file(s), +%d −%d, from %s:\n", len(d.Files), adds, dels, branch)
	for _, f := range d.Files {
		mark := map[string]string{"added": "A", "deleted": "D", "renamed": "R", "modified": "M"}[f.Status]
		fmt.Fprintf(&b, "  %s %s", cmpOr(mark, "M"), f.Path)
		if f.Binary {
			b.WriteString(" (binary)")
		} else {
			fmt.Fprintf(&b, " +%d −%d", f.Additions, f.Deletions)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func short12(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
