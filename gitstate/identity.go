package gitstate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrNoIdentity reports that git has no name or email to sign the user's commit with. Accept
// and Merge check for it before changing anything; checkpoints on session branches are signed
// "Arbor <arbor@localhost>" and never need one.
var ErrNoIdentity = errors.New(`git does not know who you are; set your identity with ` +
	`git config --global user.name "Your Name" and git config --global user.email you@example.com`)

// checkIdentity makes sure a commit made in dir gets an author and a committer, from the
// environment (GIT_AUTHOR_NAME, …, EMAIL) or the effective config (user.*, author.*,
// committer.*), the places git itself looks, without letting git guess one from the host name.
func checkIdentity(ctx context.Context, at gitAt) error {
	out, err := runGit(ctx, at, nil, "config", "-z", "--get-regexp", `^(user|author|committer)\.(name|email)$`)
	if err != nil && exitCode(err) != 1 { // 1: none is set
		return fmt.Errorf("read git identity: %w", err)
	}
	cfg := map[string]string{}
	for rec := range strings.SplitSeq(out, "\x00") {
		if k, v, ok := strings.Cut(rec, "\n"); ok {
			cfg[k] = strings.TrimSpace(v)
		}
	}
	var missing []string
	for _, role := range []string{"author", "committer"} {
		env := "GIT_" + strings.ToUpper(role) + "_"
		if firstSet(os.Getenv(env+"NAME"), cfg[role+".name"], cfg["user.name"]) == "" {
			missing = append(missing, role+" name")
		}
		if firstSet(os.Getenv(env+"EMAIL"), cfg[role+".email"], cfg["user.email"], os.Getenv("EMAIL")) == "" {
			missing = append(missing, role+" email")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (no %s)", ErrNoIdentity, strings.Join(missing, ", "))
	}
	return nil
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
