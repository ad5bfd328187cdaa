package agents

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/workspace"
)

// HarnessStore returns the harness store of one scope: the workspace scope of the repository
// containing dir (in its git common dir, beside the sessions), a session's own scope (dir is
// ignored; the session names the repository), or the user's global scope (a bare repository
// under $XDG_DATA_HOME/arbor/harness).
func (s *Service) HarnessStore(ctx context.Context, dir string, scope harness.Scope, session string) (*harness.Store, error) {
	switch scope {
	case harness.ScopeGlobal:
		data := workspace.DataDir()
		if data == "" {
			return nil, errors.New("global harness: no home directory and no XDG_DATA_HOME to keep it in")
		}
		gd := filepath.Join(data, "harness")
		if err := harness.InitBare(ctx, gd); err != nil {
			return nil, err
		}
		return harness.Open(gd, scope.Ref(""))
	case harness.ScopeSession:
		sess, err := s.Get(session)
		if err != nil {
			return nil, err
		}
		return harness.Open(sess.ws.Repo.CommonDir(), scope.Ref(sess.meta.ID))
	case harness.ScopeWorkspace:
		ws, err := s.workspaceFor(dir)
		if err != nil {
			return nil, err
		}
		return harness.Open(ws.Repo.CommonDir(), scope.Ref(""))
	}
	_, err := harness.ParseScope(string(scope))
	return nil, fmt.Errorf("%w: %w", harness.ErrInvalid, err)
}
