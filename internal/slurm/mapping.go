package slurm

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Mapping says whose quota a Slurm job uses. Without a mapping the Slurm
// account is the tenant and the QOS (or, without one, the partition) the
// workspace.
type Mapping struct {
	// Accounts maps a Slurm account to a jobfabric tenant. When it has any
	// entry, a job of an account not listed stays held.
	Accounts map[string]string `json:"accounts,omitempty"`
	// Workspaces maps a QOS or a partition to a workspace; the QOS is
	// looked up first.
	Workspaces map[string]string `json:"workspaces,omitempty"`
	// DefaultWorkspace is the workspace of a job whose QOS and partition
	// are not in Workspaces; "" falls back to the QOS, then the partition.
	DefaultWorkspace string `json:"defaultWorkspace,omitempty"`
}

// LoadMapping reads a mapping file (YAML or JSON).
func LoadMapping(path string) (Mapping, error) {
	var m Mapping
	b, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("account map: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return m, fmt.Errorf("account map %s: %w", path, err)
	}
	return m, nil
}

// tenant is the job's tenant; "" with the reason when it has none.
func (m Mapping) tenant(j *Job) (string, string) {
	if len(m.Accounts) == 0 {
		if j.Account == "" {
			return "", "the job has no Slurm account (the account is the tenant)"
		}
		return j.Account, ""
	}
	if t, ok := m.Accounts[j.Account]; ok {
		return t, ""
	}
	return "", fmt.Sprintf("account %s has no tenant in the account map", j.Account)
}

// workspace is the job's workspace.
func (m Mapping) workspace(j *Job) string {
	if w, ok := m.Workspaces[j.QOS]; ok && j.QOS != "" {
		return w
	}
	if w, ok := m.Workspaces[j.Partition]; ok && j.Partition != "" {
		return w
	}
	switch {
	case m.DefaultWorkspace != "":
		return m.DefaultWorkspace
	case j.QOS != "":
		return j.QOS
	}
	return j.Partition
}
