package server

import (
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// A runtime bridge (jobfabric slurm bridge) mirrors the jobs users hand
// to a workload runtime: it submits each as a jobfabric job carrying the
// runtime's id for it (externalId) and cancels it when the user cancels it
// there, and moves it to another pool before it starts when the user
// moves it to another partition (setJobPool, with mirrorsCancel's rule).
// These are the only things it may do beyond a runtime's reading and
// reporting, and only with a runtime token that is not a node agent's; what it sees and submits to stays what seesWorkspace allows (a
// tenant's runtime token: its tenant only). A runtime still cannot add
// work of its own (a job without an externalId) or cancel a job a user
// submitted.

// mirrorsSubmit: p may submit spec as its runtime's mirror of a user's job.
func (p *principal) mirrorsSubmit(spec *domain.JobSpec) bool {
	return p.runtime() && p.tok.Node == "" && spec.ExternalID != ""
}

// mirrorsCancel: p may cancel j, a mirror a runtime submitted. (A
// platform runtime can already end any running job by reporting it
// failed; this adds only the runtimes' own jobs before they run.)
func (p *principal) mirrorsCancel(j *domain.Job) bool {
	return p.runtime() && p.tok.Node == "" && j.ExternalID != "" &&
		strings.HasPrefix(j.SubmittedBy, string(domain.RoleRuntime)+":")
}
