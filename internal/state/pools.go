package state

import (
	"fmt"
	"maps"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// CmdPoolSet sets or deletes a server pool (pools.go).
const CmdPoolSet CommandType = "pool.set"

// PoolSet makes pool Name the set Servers; no servers deletes it. Jobs
// that name the pool follow the new set from the next cycle on: the
// running ones keep their GPUs, the pending ones are placed on the new
// set only (or wait, saying the pool does not exist).
type PoolSet struct {
	Name    string   `json:"name"`
	Servers []string `json:"servers,omitempty"`
}

// PoolSetResult is what pool.set did: the pool as it is now (nil when
// deleted), and whether anything changed.
type PoolSetResult struct {
	Pool    *domain.ServerPool
	Changed bool
}

func (f *FSM) applyPoolSet(c *Command) (any, *domain.Error) {
	p, derr := decode[PoolSet](c)
	if derr != nil {
		return nil, derr
	}
	if c.rules() < RulesPools {
		// The leader's check: a member that does not know the command
		// would stop at it. (No entry below 5 has this type.)
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "the cluster applies rules %d: server pools need %d, once every member runs a binary with them (jobfabric cluster status)", c.rules(), RulesPools)
	}
	if err := domain.ValidatePoolName("name", p.Name); err != nil {
		return nil, err
	}
	if err := domain.ValidatePoolServers("servers", p.Servers); err != nil {
		return nil, err
	}
	cur := f.d.Pools[p.Name]
	servers := slices.Sorted(slices.Values(p.Servers))
	if len(servers) == 0 {
		if c.check || cur == nil {
			return &PoolSetResult{}, nil
		}
		delete(f.d.Pools, p.Name)
		f.event(c, "pool.delete", "pool/"+p.Name, "", "", fmt.Sprintf("deleted (had %d servers)", len(cur.Servers)))
		return &PoolSetResult{Changed: true}, nil
	}
	if cur != nil && slices.Equal(cur.Servers, servers) {
		cp := copyPool(cur)
		return &PoolSetResult{Pool: cp}, nil
	}
	if c.check {
		return nil, nil
	}
	np := &domain.ServerPool{Name: p.Name, Servers: servers, UpdatedAt: c.At, UpdatedBy: c.Actor}
	if f.d.Pools == nil {
		f.d.Pools = map[string]*domain.ServerPool{}
	}
	f.d.Pools[p.Name] = np
	unknown := 0
	for _, s := range servers {
		if _, ok := f.cap.servers[s]; !ok {
			unknown++
		}
	}
	f.event(c, "pool.set", "pool/"+p.Name, "", "", fmt.Sprintf("%d servers (%d not in the inventory)", len(servers), unknown))
	return &PoolSetResult{Pool: copyPool(np), Changed: true}, nil
}

// checkPool refuses a job naming a pool the state does not have, or any
// pool below RulesPools (a member without pools would place it anywhere).
func (f *FSM) checkPool(s *domain.JobSpec, rules int) *domain.Error {
	if s.Pool == "" {
		return nil
	}
	if rules < RulesPools {
		return domain.Invalid("pool", "pool %q: the cluster applies rules %d; jobs name a pool from rules %d on, once every member runs a binary with them (jobfabric cluster status)", s.Pool, rules, RulesPools)
	}
	if _, ok := f.d.Pools[s.Pool]; !ok {
		return domain.Invalid("pool", "pool %q does not exist (jobfabric pool list)", s.Pool)
	}
	return nil
}

func copyPool(p *domain.ServerPool) *domain.ServerPool {
	cp := *p
	cp.Servers = slices.Clone(p.Servers)
	return &cp
}

// PoolView is a pool as the API shows it: its servers, and those the
// inventory does not have.
type PoolView struct {
	domain.ServerPool
	// Unknown are the pool's servers the inventory does not have (a
	// runtime's nodes jobfabric does not manage): never placed on.
	Unknown []string `json:"unknown,omitempty"`
}

// Pools lists the server pools by name.
func (f *FSM) Pools() []PoolView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]PoolView, 0, len(f.d.Pools))
	for _, name := range slices.Sorted(maps.Keys(f.d.Pools)) {
		v := PoolView{ServerPool: *copyPool(f.d.Pools[name])}
		for _, s := range v.Servers {
			if _, ok := f.cap.servers[s]; !ok {
				v.Unknown = append(v.Unknown, s)
			}
		}
		out = append(out, v)
	}
	return out
}

// PoolsNamed is the pools named by the live jobs of the workspaces sees
// accepts (a tenant token's view: listPools).
func (f *FSM) PoolsNamed(sees func(tenant, workspace string) bool) map[string]bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[string]bool{}
	for _, t := range f.reads.tally { // the workspaces with live jobs (readindex.go)
		if len(t.Pools) == 0 || !sees(t.Tenant, t.Workspace) {
			continue
		}
		for p := range t.Pools {
			out[p] = true
		}
	}
	return out
}
