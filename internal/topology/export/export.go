package export

import (
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// The formats Render writes.
const (
	FormatKueue      = "kueue"
	FormatVolcano    = "volcano"
	FormatSlurm      = "slurm"
	FormatSlurmYAML  = "slurm-yaml"
	FormatNodeLabels = "node-labels"
)

// Formats lists the formats, for flags and errors.
func Formats() []string {
	return []string{FormatKueue, FormatVolcano, FormatSlurm, FormatSlurmYAML, FormatNodeLabels}
}

// Options tune the output.
type Options struct {
	// Name is the Kueue Topology's name (default "jobfabric"); Slurm and
	// Volcano name their switches after the inventory.
	Name string
}

// Render writes t in format.
func Render(t *domain.Topology, format string, o Options) ([]byte, error) {
	if o.Name == "" {
		o.Name = "jobfabric"
	}
	tr, err := Build(t)
	if err != nil {
		return nil, err
	}
	switch format {
	case FormatKueue:
		return Kueue(tr, o.Name)
	case FormatVolcano:
		return Volcano(tr)
	case FormatSlurm:
		return []byte(SlurmTree(tr)), nil
	case FormatSlurmYAML:
		return []byte(SlurmYAML(tr)), nil
	case FormatNodeLabels:
		return []byte(LabelScript(tr)), nil
	}
	return nil, domain.Invalid("format", "format %q is not one of %s", format, strings.Join(Formats(), ", "))
}
