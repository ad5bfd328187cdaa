package workspace

import (
	"fmt"

	"github.com/arborhq/arbor/sandbox"
)

// fileLimits is "limits": the process and memory budget of each kernel and setup command
// (sandbox.Limits). From a repository's arbor.json it is guarded: a repository that raises it
// lets its code take more of the machine.
type fileLimits struct {
	// Processes bounds tasks (processes and threads) at once; -1 is no limit.
	Processes *int `json:"processes"`
	// Memory is bytes with a unit ("8GiB"), a share of the machine's memory ("50%"), or
	// "unlimited".
	Memory *string `json:"memory"`
}

func (f *fileLimits) apply(dst *sandbox.Limits) error {
	if f == nil {
		return nil
	}
	if p := f.Processes; p != nil {
		if *p != -1 && *p < sandbox.MinProcesses {
			return fmt.Errorf("%s %d: want at least %d (a kernel runs a dozen threads), or -1 for no limit", sandbox.SettingProcesses, *p, sandbox.MinProcesses)
		}
		dst.Processes = *p
	}
	if f.Memory != nil {
		n, err := sandbox.ParseMemory(*f.Memory, sandbox.PhysicalMemory())
		if err != nil {
			return err
		}
		dst.Memory = n
	}
	return nil
}
