package topology

import (
	"fmt"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// maxDetails caps the problems listed in one error: enough to fix a file in a
// few rounds, small enough that a badly broken file does not produce a
// megabyte-sized API response.
const maxDetails = 100

// problems collects every broken rule so one round trip reports them all.
type problems struct {
	details []domain.Detail
	total   int
}

func (p *problems) add(field, object, rule, format string, args ...any) {
	p.total++
	if len(p.details) < maxDetails {
		p.details = append(p.details, domain.Detail{Field: field, Object: object, Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
}

// err returns nil when nothing was found, else one invalid_argument error
// whose Field is the first problem's, so clients that only read Field still
// point at something real.
func (p *problems) err(what string) *domain.Error {
	if p.total == 0 {
		return nil
	}
	first := p.details[0]
	msg := fmt.Sprintf("%s has 1 problem: %s", what, first.Message)
	if p.total > 1 {
		msg = fmt.Sprintf("%s has %d problems; first: %s", what, p.total, first.Message)
		if p.total > len(p.details) {
			msg += fmt.Sprintf(" (only the first %d are listed)", len(p.details))
		}
	}
	return &domain.Error{Code: domain.CodeInvalidArgument, Message: msg, Field: first.Field, Details: p.details}
}
