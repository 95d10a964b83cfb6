package domain

import (
	"fmt"
	"time"
)

// ServerPool is a named set of servers: where a workload runtime can run
// a job (a Slurm partition: slurm:CLUSTER:PARTITION), or a set an admin
// names. A job that names a pool (JobSpec.Pool) is placed only on its
// servers. A server may be in several pools; servers the inventory does
// not have are kept (a runtime may know nodes jobfabric does not) and
// simply never placed on.
type ServerPool struct {
	Name string `json:"name"`
	// Servers are the pool's servers, sorted.
	Servers   []string  `json:"servers"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy,omitempty"`
}

// Pool limits: a name is a runtime's prefix and its own names (slurm,
// a cluster, a partition); a pool may list every server of a large
// cluster.
const (
	MaxPoolName    = 128
	MaxPoolServers = 100_000
	MaxServerName  = 253 // a DNS name: runtimes name nodes by host name
)

// ValidatePoolName checks a pool's name: 1 to 128 characters, one or
// more ':'-separated parts of letters, digits, '.', '_' and '-' (Slurm
// partition and cluster names keep their case and underscores).
func ValidatePoolName(field, name string) *Error {
	if name == "" || len(name) > MaxPoolName {
		return Invalid(field, "%s %q must be 1 to %d characters", field, truncate(name, 80), MaxPoolName)
	}
	part := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == ':':
			if part == 0 {
				return Invalid(field, "%s %q has an empty part: parts are separated by single ':' (slurm:CLUSTER:PARTITION)", field, truncate(name, 80))
			}
			part = 0
		case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-':
			part++
		default:
			return Invalid(field, "%s %q must be letters, digits, '.', '_' and '-', in parts separated by ':' (slurm:CLUSTER:PARTITION)", field, truncate(name, 80))
		}
	}
	if part == 0 {
		return Invalid(field, "%s %q has an empty part: parts are separated by single ':' (slurm:CLUSTER:PARTITION)", field, truncate(name, 80))
	}
	return nil
}

// ValidatePoolServers checks a pool's server list: at most
// MaxPoolServers names, each printable ASCII without spaces, none twice.
func ValidatePoolServers(field string, servers []string) *Error {
	if len(servers) > MaxPoolServers {
		return Invalid(field, "%d servers; the limit is %d", len(servers), MaxPoolServers)
	}
	seen := make(map[string]bool, len(servers))
	for i, s := range servers {
		f := fmt.Sprintf("%s[%d]", field, i)
		if s == "" || len(s) > MaxServerName {
			return Invalid(f, "server name %q must be 1 to %d characters", truncate(s, 80), MaxServerName)
		}
		for k := 0; k < len(s); k++ {
			if c := s[k]; c <= ' ' || c > '~' {
				return Invalid(f, "server name %q must be printable ASCII without spaces", truncate(s, 80))
			}
		}
		if seen[s] {
			return Invalid(f, "server %q is listed twice", truncate(s, 80))
		}
		seen[s] = true
	}
	return nil
}
