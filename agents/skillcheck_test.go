package agents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
)

// A skill id is a file name: one that climbs out of the check's directory is refused before
// anything is written, wherever it points.
func TestSkillIDTraversalRefusedBeforeAnyWrite(t *testing.T) {
	needSandbox(t)
	victim := t.TempDir()
	id := strings.Repeat("../", 16) + strings.TrimPrefix(victim, "/") + "/evil"
	code := fmt.Sprintf("try:\n    await harness.skills.create(%q, 'Probe', body='probe()', module='X = 1')\n    print('stored')\nexcept ArborError as e:\n    print('refused:', e)", id)
	e := newEnvIn(t, sandboxScript(t, code), filepath.Join(t.TempDir(), "repo"))
	s := e.create("probe a skill id")
	e.settled(s)
	out := fmt.Sprint(e.events(s, event.TypeToolFinished)[0]["output"])
	if !strings.Contains(out, "refused:") || !strings.Contains(out, "module name") {
		t.Errorf("the traversing id was not refused as an id:\n%s", out)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Errorf("the skill check wrote %v outside its directory", ents)
	}
}
