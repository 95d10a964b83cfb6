package verify

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Check names, in the order a Report lists them.
const (
	CheckLinks           = "links"
	CheckTenantIDs       = "tenant-ids"
	CheckJobEndpoints    = "job-endpoints"
	CheckBindings        = "bindings"
	CheckTenantIsolation = "tenant-isolation"
	CheckJobIsolation    = "job-isolation"
	CheckServerPorts     = "server-ports"
	CheckUnderlay        = "underlay-isolation"
	CheckSwitchTraffic   = "switch-traffic"
	CheckOverlay         = "overlay"
)

// Rules: what a failure broke. A check has one or more rules.
const (
	// links
	RuleLinkTwoVRFs   = "link-two-vrfs"    // a port is bound to two VRFs
	RuleLinkNoSuchVRF = "link-no-such-vrf" // a port names a VRF its device lacks
	RuleLinkTenant    = "link-tenant"      // a port's tenant is not its VRF's tenant
	// tenant-ids
	RuleVRFShared   = "vrf-shared"   // one VRF name, two tenants (or twice on a device)
	RuleVRFTenant   = "vrf-tenant"   // a VRF of a tenant the input does not have
	RuleVNIShared   = "vni-shared"   // one VNI, two tenants
	RuleVNIReused   = "vni-reused"   // one VNI, two purposes (an L2VNI on two links, or L2 and L3)
	RuleVLANShared  = "vlan-shared"  // one VLAN of a leaf, two purposes (two VRFs' L3 VLANs, or an L3 VLAN and a link's)
	RuleRDShared    = "rd-shared"    // one route distinguisher, two VRFs
	RuleRTShared    = "rt-shared"    // one route target exported by two tenants
	RuleRTImport    = "rt-import"    // a VRF imports a target that is not its tenant's
	RuleGroupShared = "group-shared" // one group ID in two tenants' policies
	// job-endpoints
	RuleJobLink   = "job-link"   // a job's link has no port in the intent
	RuleJobVRF    = "job-vrf"    // a job's link is not (only) in its tenant's VRF
	RuleJobGroup  = "job-group"  // a segmented job's link is not in the job's group
	RuleGroupPort = "group-port" // a port's classification is ambiguous or contradicts its group's member list
	// bindings
	RuleInput          = "input"           // the input itself is inconsistent
	RuleBindingUnbound = "binding-unbound" // an allocated link is in no VRF
	RuleBindingTenant  = "binding-tenant"  // an allocated link is in another tenant's VRF
	RuleBindingOrphan  = "binding-orphan"  // a link is in a VRF but nobody holds it
	RuleBindingJobs    = "binding-jobs"    // a port names other jobs than the allocations
	RuleBindingPort    = "binding-port"    // a cable without a port, or a port without a cable
	// isolation
	RuleReachTenant = "reach-tenant"  // an endpoint reaches another tenant's
	RuleReachJobGBP = "reach-job-gbp" // under group policy, an endpoint reaches another job's
	RuleReachJobACL = "reach-job-acl" // under the ACL fallback, an endpoint reaches another job's
	RuleSharedLink  = "shared-link"   // two jobs of a segmented tenant share one link
	// server-ports
	RulePortQuarantine = "port-quarantine" // a port in no VRF is not quarantined (or one in a VRF is)
	RulePortGuard      = "port-guard"      // a server port lacks the ingress guard
	RulePortSource     = "port-source"     // an assigned port accepts sources that are not its server's own
	// underlay-isolation: a server port as an attacker
	RuleReachUnderlay     = "reach-underlay"      // reaches a loopback/VTEP, uplink or BGP peer address
	RuleReachControlPlane = "reach-control-plane" // reaches its leaf's control plane (bgpd on TCP 179, link-local services)
	RuleReachVNI          = "reach-vni"           // can hand a VTEP a crafted VXLAN packet: into its VNIs and groups
	// switch-traffic
	RuleICMPSwitchGroup   = "icmp-switch-group"   // a group-policy VRF drops the leaves' own ICMP errors
	RuleSwitchGroupForged = "switch-group-forged" // a server or group carries the switches' group
	// overlay
	RuleEVPNPath    = "evpn-path"     // a leaf's EVPN routes do not reach a leaf sharing a tenant
	RuleEVPNNextHop = "evpn-next-hop" // they reach it, but a transit switch rewrote the next hop
)

// MaxFailures is how many failures one check lists; the rest are counted in
// Check.Omitted (a leak between two large tenants would otherwise list
// millions of endpoint pairs).
const MaxFailures = 1000

// Report is the outcome of Verify: one Check per property, in a fixed order.
type Report struct {
	Checks []Check `json:"checks"`
	Stats  Stats   `json:"stats"`
}

// Stats say how much was verified.
type Stats struct {
	Devices   int `json:"devices"`
	VRFs      int `json:"vrfs"`      // VRF instances (device, VRF)
	Endpoints int `json:"endpoints"` // server ports
	Bound     int `json:"bound"`     // endpoints in a VRF
	Jobs      int `json:"jobs"`      // running jobs of the input
	// Quarantined counts server ports that are admin-down; Guarded those
	// with the ingress guard.
	Quarantined int `json:"quarantined"`
	Guarded     int `json:"guarded"`
}

// Check is one property and what broke it.
type Check struct {
	Name string `json:"name"`
	// About says in one line what the check proves.
	About    string    `json:"about"`
	OK       bool      `json:"ok"`
	Failures []Failure `json:"failures,omitempty"`
	// Omitted counts failures beyond MaxFailures, not listed.
	Omitted int `json:"omitted,omitempty"`
}

// Failure is one violation: which rule, on which device and object.
type Failure struct {
	Rule   string `json:"rule"`
	Device string `json:"device,omitempty"`
	// Object names what is wrong on the device: a port, a VRF, an RD.
	Object string `json:"object,omitempty"`
	Detail string `json:"detail"`
}

func (f Failure) String() string {
	var b strings.Builder
	b.WriteString(f.Rule)
	if f.Device != "" {
		b.WriteString(" " + f.Device)
		if f.Object != "" {
			b.WriteString("/" + f.Object)
		}
	} else if f.Object != "" {
		b.WriteString(" " + f.Object)
	}
	b.WriteString(": " + f.Detail)
	return b.String()
}

func compareFailures(a, b Failure) int {
	return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(a.Device, b.Device),
		strings.Compare(a.Object, b.Object), strings.Compare(a.Detail, b.Detail))
}

// OK reports whether every check passed.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Check returns the named check, or nil.
func (r *Report) Check(name string) *Check {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// Rules lists the rules that failed, sorted, each once.
func (r *Report) Rules() []string {
	var out []string
	for _, c := range r.Checks {
		for _, f := range c.Failures {
			out = append(out, f.Rule)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Failures lists every listed failure, check by check.
func (r *Report) Failures() []Failure {
	var out []Failure
	for _, c := range r.Checks {
		out = append(out, c.Failures...)
	}
	return out
}

// Err is nil when the report is OK, and otherwise a failed_precondition
// *domain.Error whose Details are the failures (Rule, Field = device,
// Object, Message = detail), for the API and the CLI's exit status.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	var failed []string
	e := &domain.Error{Code: domain.CodeFailedPrecondition}
	n := 0
	for _, c := range r.Checks {
		if c.OK {
			continue
		}
		failed = append(failed, c.Name)
		n += len(c.Failures) + c.Omitted
		for _, f := range c.Failures {
			obj := f.Object
			if f.Device != "" {
				obj = f.Device + "/" + f.Object
			}
			e.Details = append(e.Details, domain.Detail{Rule: f.Rule, Object: obj, Message: f.Detail})
		}
	}
	e.Message = fmt.Sprintf("the fabric intent fails verification: %d failures in %s", n, strings.Join(failed, ", "))
	return e
}

// String renders the report for a person: one line per check, then its
// failures (at most limit per check; limit <= 0 means all of them).
func (r *Report) String() string { return r.Text(20) }

// Text is String with a chosen number of failures shown per check.
func (r *Report) Text(limit int) string {
	var b strings.Builder
	failed := 0
	for _, c := range r.Checks {
		if !c.OK {
			failed++
		}
	}
	verdict := "OK"
	if failed > 0 {
		verdict = fmt.Sprintf("FAILED (%d of %d checks)", failed, len(r.Checks))
	}
	fmt.Fprintf(&b, "fabric verify: %s: %d devices, %d VRF instances, %d endpoints (%d in a VRF, %d quarantined, %d guarded), %d running jobs\n",
		verdict, r.Stats.Devices, r.Stats.VRFs, r.Stats.Endpoints, r.Stats.Bound, r.Stats.Quarantined, r.Stats.Guarded, r.Stats.Jobs)
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range r.Checks {
		status := "ok  "
		if !c.OK {
			status = "FAIL"
		}
		fmt.Fprintf(&b, "  %s  %-*s  %s\n", status, width, c.Name, c.About)
		shown := c.Failures
		if limit > 0 && len(shown) > limit {
			shown = shown[:limit]
		}
		for _, f := range shown {
			fmt.Fprintf(&b, "        %s\n", f)
		}
		if more := len(c.Failures) - len(shown) + c.Omitted; more > 0 {
			fmt.Fprintf(&b, "        ... and %d more\n", more)
		}
	}
	return b.String()
}

// checkBuilder collects one check's failures.
type checkBuilder struct {
	c Check
	n int
}

func newCheck(name, about string) *checkBuilder {
	return &checkBuilder{c: Check{Name: name, About: about}}
}

func (cb *checkBuilder) fail(rule, device, object, format string, args ...any) {
	cb.n++
	if len(cb.c.Failures) >= MaxFailures {
		cb.c.Omitted++
		return
	}
	cb.c.Failures = append(cb.c.Failures, Failure{Rule: rule, Device: device, Object: object, Detail: fmt.Sprintf(format, args...)})
}

// full reports whether further failures would only be counted, so callers
// can skip building their details.
func (cb *checkBuilder) full() bool { return len(cb.c.Failures) >= MaxFailures }

func (cb *checkBuilder) done() Check {
	slices.SortFunc(cb.c.Failures, compareFailures)
	cb.c.Failures = slices.CompactFunc(cb.c.Failures, func(a, b Failure) bool { return a == b })
	cb.c.OK = cb.n == 0
	return cb.c
}
