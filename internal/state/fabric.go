package state

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/pool"
)

// The fabric in the replicated state. The leader compiles the desired
// configuration of every switch from the state (fabric.Compile), renders it
// and commits it as a numbered revision; it deploys the revision through a
// driver and commits each device's outcome. The state machine keeps:
//   - the id pools (VNIs, RDs, RTs, VLANs, group IDs): ids are decided here,
//     at the time recorded in the command, never by the compiler;
//   - the revisions (only the devices each one changed; the full set at
//     any kept revision is the newest change of each device up to it);
//   - each device's deployed revision and last error;
//   - the network readiness gate: a Placed job becomes Ready once the
//     revision carrying its ports and groups is deployed on every leaf
//     where it has links (jobLeaves);
//   - every server port's membership (VRF and group) in the latest
//     revision, and the revision that last changed it: a port never moves
//     from one membership to another in one revision. The old one is
//     removed first (the port quarantined), and the new one added only
//     once that removal is deployed on the port's leaf; the job waiting
//     for the port is held out of the revisions until then (Held).

// maxRevisions is how many revisions are kept; older ones fold into the
// oldest kept one (their devices' configs stay reachable).
const maxRevisions = 64

// DeviceConfig is one device's rendered configuration.
type DeviceConfig struct {
	NOS   string `json:"nos"`
	Role  string `json:"role"`
	Files []File `json:"files"`
	Hash  string `json:"hash"`
}

// File is one configuration file of a device, as the state stores it: the
// renderer's output (render.File, the same fields and encoding), kept as
// text. The state machine only hashes and stores files, so it does not
// link the renderers.
type File struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// ConfigHash fingerprints a device's files.
func ConfigHash(nos string, files []File) string {
	h := sha256.New()
	h.Write([]byte(nos))
	for _, f := range files {
		fmt.Fprintf(h, "\x00%s\x00%d\x00", f.Name, len(f.Content))
		h.Write([]byte(f.Content))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// FabricRevision is one committed compile.
type FabricRevision struct {
	Rev     uint64                  `json:"rev"`
	At      time.Time               `json:"at"`
	Cause   string                  `json:"cause,omitempty"`
	Changed map[string]DeviceConfig `json:"changed,omitempty"`
	Removed []string                `json:"removed,omitempty"`
	InUse   fabric.InUse            `json:"inUse"`
	Verify  []string                `json:"verify,omitempty"`
	// Blocked: the verifier failed on it (Verify); no device is given it
	// (FabricRevisionCmd.Blocked). Override is the admin who let the
	// devices have it anyway, and why (CmdFabricOverride).
	Blocked  bool   `json:"blocked,omitempty"`
	Override string `json:"override,omitempty"`
}

// PortMember is a server port's membership in the latest revision.
type PortMember struct {
	// Member is PortMembership of the port ("" for none).
	Member string `json:"member,omitempty"`
	// Rev is the revision that set it.
	Rev uint64 `json:"rev"`
}

// PortKey names a server port in Ports: "leaf/port".
func PortKey(leaf, port string) string { return leaf + "/" + port }

// PortMembership is what a port's traffic may reach, as one string: its
// VRF, and its group in a segmented VRF ("" when the port is in no VRF).
// Two jobs of one tenant without segmentation are the same membership.
func PortMembership(p *fabric.Port) string {
	if !p.Assigned() {
		return ""
	}
	if p.Group != 0 {
		return p.VRF + "/group " + strconv.Itoa(int(p.Group))
	}
	return p.VRF
}

// DeviceState is what the state knows of one switch.
type DeviceState struct {
	Name        string    `json:"name"`
	NOS         string    `json:"nos"`
	Role        string    `json:"role"`
	DesiredRev  uint64    `json:"desiredRevision"`
	DesiredHash string    `json:"desiredHash"`
	DeployedRev uint64    `json:"deployedRevision"`
	Deployed    string    `json:"deployedHash,omitempty"`
	Error       string    `json:"error,omitempty"`
	UpdatedAt   time.Time `json:"updatedAt,omitzero"`
	// Conditions are the switch's conditions from its latest deploy.
	Conditions []domain.SwitchCondition `json:"conditions,omitempty"`
}

// fabricData is the fabric part of the persisted state.
type fabricData struct {
	Pools     *pool.State             `json:"pools,omitempty"`
	Rev       uint64                  `json:"rev"`
	Revisions []*FabricRevision       `json:"revisions,omitempty"`
	Devices   map[string]*DeviceState `json:"devices,omitempty"`
	// Options are the compiler's options; the operator sets
	// VRFPlacement (CmdFabricOptions).
	Options fabric.Options `json:"options"`
	// L3VLANMin and L3VLANMax bound every leaf's L3 VLAN pool; 0: the
	// default range (pool.LeafL3VLANSpec).
	L3VLANMin uint32 `json:"l3VLANMin,omitempty"`
	L3VLANMax uint32 `json:"l3VLANMax,omitempty"`
	// Ports are the server ports with a membership, and those that lost
	// one in a revision not yet deployed on their leaf.
	Ports map[string]PortMember `json:"ports,omitempty"`
	// Held are the jobs the latest revision held out.
	Held []HeldJob `json:"held,omitempty"`
}

// holdsGPUs: the job's allocation is in the fabric.
func holdsGPUs(j *domain.Job) bool {
	return j.State.HoldsGPUs() && len(j.Placement) > 0
}

// FabricInput is the compiler's input built from the state at now: the id
// pools are synced on a copy (what the state machine will do when the
// revision is committed with SyncAt now) and the ids filled in. IDsHash
// identifies the sync's outcome.
// Jobs in held are left out (see FabricRevisionCmd.Held).
func (f *FSM) FabricInput(now time.Time, held []uint64) (in fabric.Input, idsHash string, jobs []uint64, err error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ps := f.pools().Clone()
	in, jobs = f.fabricInput(held)
	if err := syncIDs(ps, &in, now, f.l3Range()); err != nil {
		return in, "", nil, err
	}
	return in, poolsHash(ps), jobs, nil
}

func (f *FSM) pools() *pool.State {
	if f.d.Fabric.Pools != nil {
		return f.d.Fabric.Pools
	}
	ps, _ := pool.New(pool.DefaultSpecs(pool.DefaultQuarantine)...)
	return ps
}

// fabricInput lists tenants, allocations and the jobs they belong to,
// leaving out the jobs in held.
func (f *FSM) fabricInput(held []uint64) (fabric.Input, []uint64) {
	in := fabric.Input{Topology: f.d.Topology, Options: f.d.Fabric.Options}
	for _, name := range slices.Sorted(maps.Keys(f.d.Tenants)) {
		in.Tenants = append(in.Tenants, *f.d.Tenants[name])
	}
	var jobs []uint64
	for j := range f.jobs.liveJobs() {
		if !holdsGPUs(j) || slices.Contains(held, j.ID) {
			continue
		}
		jobs = append(jobs, j.ID)
		for _, p := range j.Placement {
			whole := false
			if s, ok := f.cap.servers[p.Server]; ok {
				whole = len(p.GPUs) == s.GPUs && len(p.MIG) == 0 && p.Share == 0
			}
			in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: j.Tenant, Server: p.Server, GPUs: slices.Clone(p.GPUs), Whole: whole, JobID: strconv.FormatUint(j.ID, 10)})
		}
	}
	return in, jobs
}

// syncIDs makes the pools hold exactly the ids the input needs (tenant
// VRFs, vlan-aware MAC-VRFs and links, job groups of segmented tenants),
// releasing the others into quarantine, and fills in.IDs and in.Groups.
// Deterministic: owners are visited in sorted order.
// Every leaf's L3 VLAN pool gets range l3r (zero: the default).
func syncIDs(ps *pool.State, in *fabric.Input, now time.Time, l3r vlanRange) error {
	for _, sp := range pool.DefaultSpecs(pool.DefaultQuarantine) {
		if err := ps.Ensure(sp); err != nil {
			return err
		}
	}
	ps.Index() // ps is the caller's copy (a Clone, or new pools), nobody else reads it
	type need struct{ pool, owner string }
	var want []need
	segmented := map[string]bool{}
	vlanAware := map[string]bool{}
	for _, t := range in.Tenants {
		o := "tenant/" + t.Name
		want = append(want, need{pool.VNI, o}, need{pool.VRFID, o})
		if t.Network == domain.NetworkVLANAware {
			vlanAware[t.Name] = true
			want = append(want, need{pool.VRFID, o + "/mac"}, need{pool.RT, o + "/mac"})
		}
		if t.JobSegmentation {
			segmented[t.Name] = true
			want = append(want, need{pool.Group, o + "/unclassified"})
		}
	}
	seenJob := map[string]bool{}
	for _, a := range in.Allocations {
		if segmented[a.Tenant] && a.JobID != "" && !seenJob[a.JobID] {
			seenJob[a.JobID] = true
			want = append(want, need{pool.Group, "job/" + a.JobID})
		}
	}
	var links []fabric.LinkOwner
	if len(vlanAware) > 0 && in.Topology != nil {
		owners, err := fabric.Owners(*in)
		if err != nil {
			return err
		}
		for _, o := range owners {
			if vlanAware[o.Tenant] {
				links = append(links, o)
				if err := ps.Ensure(pool.LinkVLANSpec(o.Link.Leaf, pool.DefaultQuarantine)); err != nil {
					return err
				}
				lo := linkOwner(o)
				want = append(want, need{pool.LinkVLAN(o.Link.Leaf), lo}, need{pool.VNI, lo})
			}
		}
	}
	// L3 VLANs per leaf, where the leaf's NOS needs one. A tenant that
	// held a fabric-wide L3 VLAN (pool.L3VLAN, before per-leaf pools)
	// keeps that number on each leaf where it is still free, so an
	// upgrade renumbers nothing that is deployed.
	var l3 []fabric.LeafTenant
	oldL3 := map[string]uint32{}
	if in.Topology != nil {
		needs, err := fabric.L3VLANNeeds(*in)
		if err != nil {
			return err
		}
		nos := fabric.LeafNOS(*in)
		for _, lt := range needs {
			if err := ensureL3Pool(ps, lt.Leaf, nos[lt.Leaf], l3r); err != nil {
				return err
			}
			o := "tenant/" + lt.Tenant
			if id, ok := ps.Lookup(pool.L3VLAN, o); ok {
				oldL3[o] = id
			}
			l3 = append(l3, lt)
			want = append(want, need{pool.LeafL3VLAN(lt.Leaf), o})
		}
	}
	wanted := map[string]map[string]bool{} // pool -> owner
	for _, n := range want {
		w := wanted[n.pool]
		if w == nil {
			w = map[string]bool{}
			wanted[n.pool] = w
		}
		w[n.owner] = true
	}
	// The pools made since: index them too (thousands of owners a pool
	// with every VRF on every leaf).
	ps.Index()
	// Release first, so that ids in quarantine are not handed out again
	// within this sync.
	for _, name := range ps.Names() {
		w := wanted[name]
		var gone []string // in id order, as they are released
		for _, e := range ps.Pools[name].Entries {
			if e.Owner != "" && !w[e.Owner] {
				gone = append(gone, e.Owner)
			}
		}
		for _, o := range gone {
			if _, _, err := ps.Release(name, o, now); err != nil {
				return err
			}
		}
	}
	for _, n := range want {
		if id, ok := oldL3[n.owner]; ok && strings.HasPrefix(n.pool, "l3vlan/") {
			if _, held := ps.Lookup(n.pool, n.owner); !held && ps.Reserve(n.pool, n.owner, id, now) == nil {
				continue
			}
		}
		if _, err := ps.Allocate(n.pool, n.owner, now); err != nil {
			return err
		}
	}
	look := func(p, o string) uint32 { id, _ := ps.Lookup(p, o); return id }
	in.IDs = fabric.IDs{Tenants: map[string]fabric.TenantIDs{}, Links: map[fabric.LinkRef]fabric.LinkIDs{}}
	for _, t := range in.Tenants {
		o := "tenant/" + t.Name
		ids := fabric.TenantIDs{L3VNI: look(pool.VNI, o), VRFID: uint16(look(pool.VRFID, o))}
		if vlanAware[t.Name] {
			ids.MACVRFID, ids.MACRT = uint16(look(pool.VRFID, o+"/mac")), look(pool.RT, o+"/mac")
		}
		if segmented[t.Name] {
			ids.UnclassifiedGroup = uint16(look(pool.Group, o+"/unclassified"))
		}
		in.IDs.Tenants[t.Name] = ids
	}
	in.IDs.L3VLANs = make(map[fabric.LeafTenant]uint16, len(l3))
	for _, lt := range l3 {
		in.IDs.L3VLANs[lt] = uint16(look(pool.LeafL3VLAN(lt.Leaf), "tenant/"+lt.Tenant))
	}
	for _, o := range links {
		lo := linkOwner(o)
		in.IDs.Links[o.Link] = fabric.LinkIDs{Tenant: o.Tenant, VLAN: uint16(look(pool.LinkVLAN(o.Link.Leaf), lo)), L2VNI: look(pool.VNI, lo)}
	}
	in.Groups = nil
	done := map[string]bool{}
	for _, a := range in.Allocations {
		if segmented[a.Tenant] && a.JobID != "" && !done[a.JobID] {
			done[a.JobID] = true
			in.Groups = append(in.Groups, fabric.Group{Tenant: a.Tenant, Name: "job-" + a.JobID, ID: uint16(look(pool.Group, "job/"+a.JobID)), JobID: a.JobID})
		}
	}
	return nil
}

// vlanRange is a leaf's L3 VLAN range; the zero value is the default.
type vlanRange struct{ min, max uint32 }

func (f *FSM) l3Range() vlanRange {
	return vlanRange{f.d.Fabric.L3VLANMin, f.d.Fabric.L3VLANMax}
}

// ensureL3Pool makes leaf's L3 VLAN pool exist with range r (the zero
// range: the default for the leaf's NOS). A pool made with another range
// is resized: ids it gave out stay valid (and taken) even outside the new
// range, so a change renumbers nothing.
func ensureL3Pool(ps *pool.State, leaf, nos string, r vlanRange) error {
	sp := pool.LeafL3VLANSpecFor(leaf, nos, pool.DefaultQuarantine)
	if r.min != 0 {
		sp.Min, sp.Max = r.min, r.max
	}
	if err := ps.Ensure(sp); err != nil {
		return err
	}
	if p := ps.Pools[sp.Name]; p.Min != sp.Min || p.Max != sp.Max {
		return ps.Resize(sp)
	}
	return nil
}

func linkOwner(o fabric.LinkOwner) string {
	return "link/" + o.Link.Leaf + "/" + o.Link.Port + "/" + o.Tenant
}

func poolsHash(ps *pool.State) string {
	b, _ := json.Marshal(ps)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (f *FSM) applyFabricRevision(c *Command) (any, *domain.Error) {
	p, derr := decode[FabricRevisionCmd](c)
	if derr != nil {
		return nil, derr
	}
	var held []uint64
	for _, h := range p.Held {
		held = append(held, h.Job)
	}
	ps := f.pools().Clone()
	in, _ := f.fabricInput(held)
	if err := syncIDs(ps, &in, p.SyncAt, f.l3Range()); err != nil {
		return nil, asDomainError(err)
	}
	if h := poolsHash(ps); h != p.IDsHash {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "idsHash",
			Message: "the state changed since this revision was compiled (ids differ): compile again"}
	}
	for name, dc := range p.Changed {
		if dc.Hash != ConfigHash(dc.NOS, dc.Files) {
			return nil, domain.Invalid("changed", "device %s: hash %s does not match its files", name, dc.Hash)
		}
	}
	if derr := f.checkPortMoves(p.Ports); derr != nil {
		return nil, derr
	}
	if p.Blocked && len(p.Verify) == 0 {
		return nil, domain.Invalid("blocked", "a blocked revision names the verifier's failures (verify is empty)")
	}
	if c.check {
		return nil, nil
	}
	fd := &f.d.Fabric
	// The devices the blocked revisions since the deployable one remove
	// leave the state only with a revision the devices are given.
	var removed []string
	switch {
	case c.rules() < RulesBlockedKeepsDevices:
		removed = p.Removed
	case !p.Blocked:
		removed = removalsBehind(fd.Revisions, p.Changed, p.Removed)
	}
	fd.Pools = ps
	fd.Rev++
	rev := &FabricRevision{Rev: fd.Rev, At: c.At, Cause: p.Cause, Changed: p.Changed, Removed: p.Removed, InUse: p.InUse, Verify: p.Verify, Blocked: p.Blocked}
	fd.Revisions = append(fd.Revisions, rev)
	f.foldRevisions()
	if fd.Devices == nil {
		fd.Devices = map[string]*DeviceState{}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Changed)) {
		dc := p.Changed[name]
		d := fd.Devices[name]
		if d == nil {
			d = &DeviceState{Name: name}
			fd.Devices[name] = d
		}
		d.NOS, d.Role, d.DesiredRev, d.DesiredHash = dc.NOS, dc.Role, fd.Rev, dc.Hash
	}
	for _, name := range removed {
		delete(fd.Devices, name)
	}
	// A device the revision does not change, and that runs its desired
	// config, runs this revision too.
	for name, d := range fd.Devices {
		if _, changed := p.Changed[name]; !changed && d.Deployed == d.DesiredHash && d.Error == "" {
			d.DeployedRev = fd.Rev
		}
	}
	if len(p.Ports) > 0 && fd.Ports == nil {
		fd.Ports = map[string]PortMember{}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Ports)) {
		fd.Ports[k] = PortMember{Member: p.Ports[k], Rev: fd.Rev}
	}
	fd.Held = p.Held
	for _, id := range p.Jobs {
		if j, ok := f.d.Jobs[id]; ok && j.State == domain.JobPlaced && j.NetworkRev == 0 && !slices.Contains(held, id) {
			j.NetworkRev = fd.Rev
			f.jobs.touch(j)
		}
	}
	for _, h := range p.Held {
		if j, ok := f.d.Jobs[h.Job]; ok && j.State == domain.JobPlaced && j.NetworkRev != 0 && h.Why == "verify" {
			// A blocked revision carried it; this one leaves its ports
			// out: the gate must not make it Ready on that revision's
			// deploy. (Only verify holds take a carried job.)
			j.NetworkRev = 0
			f.jobs.touch(j)
		}
		if j, ok := f.d.Jobs[h.Job]; ok && j.State == domain.JobPlaced && j.NetworkRev == 0 {
			msg := fmt.Sprintf("waiting for port %s to leave its previous tenant or group: the removal is deployed first (revision %d), then its network is added", h.Port, fd.Rev)
			switch h.Why {
			case "deploying":
				msg = fmt.Sprintf("waiting for the removal of port %s's previous membership (revision %d) to be deployed on its leaf before its network is added", h.Port, fd.Ports[h.Port].Rev)
			case "verify":
				// Not the failure (h.Reason): it may name other tenants.
				at := "its network"
				if h.Port != "" {
					at = "port " + h.Port
				}
				msg = fmt.Sprintf("held out of fabric revision %d: the verifier refused the configuration %s would get (rule %s), so no switch is given it; the other jobs' changes go on. An admin sees the failure in `jobfabric fabric revisions`; the job is compiled again at every fabric change and at `jobfabric fabric deploy`", fd.Rev, at, h.Rule)
			case "l3vlan":
				// Not the pool's account (h.Reason, in the revision's
				// cause): it counts the VLANs other tenants hold there.
				// The leaf's own pool's range: an NX-OS leaf's default
				// stops below the switch's reserved VLANs.
				o := f.fabricOptions()
				lo, hi := o.L3VLANMin, o.L3VLANMax
				if lp := f.pools().Pools[pool.LeafL3VLAN(h.Leaf)]; lp != nil {
					lo, hi = lp.Min, lp.Max
				}
				msg = fmt.Sprintf("waiting for an L3 VLAN on leaf %s for tenant %s's VRF: every one of the leaf's L3 VLANs (%d-%d) is taken or in quarantine; it gets one when one frees up, or when an admin widens the range (jobfabric fabric options --l3-vlans)", h.Leaf, j.Tenant, lo, hi)
			}
			r := domain.Reason{Code: domain.ReasonNetwork, Message: msg}
			if j.Reason == nil || *j.Reason != r {
				j.Reason, j.UpdatedAt = &r, c.At
				f.jobs.touch(j)
			}
		}
	}
	msg := fmt.Sprintf("revision %d: %d devices changed, %d removed", fd.Rev, len(p.Changed), len(p.Removed))
	if p.Cause != "" {
		msg += " (" + p.Cause + ")"
	}
	if len(p.Verify) > 0 {
		msg += fmt.Sprintf("; verifier: %d failures", len(p.Verify))
	}
	if p.Blocked {
		msg += fmt.Sprintf(": blocked, the devices stay on revision %d (verify failed: %s)", f.deployableLocked(), p.Verify[0])
	}
	f.event(c, "fabric.revision", fmt.Sprintf("fabric/%d", fd.Rev), "", "", msg)
	f.gate(c)
	return rev, nil
}

// checkPortMoves refuses a revision that moves a server port from one
// membership straight to another, or gives a port a membership while the
// removal of its previous one is not yet deployed on its leaf: during
// either, both the old and the new tenant (or job group) could reach the
// server behind it.
func (f *FSM) checkPortMoves(ports map[string]string) *domain.Error {
	fd := &f.d.Fabric
	for _, k := range slices.Sorted(maps.Keys(ports)) {
		want := ports[k]
		cur := fd.Ports[k]
		if want == "" || want == cur.Member {
			continue
		}
		if cur.Member != "" {
			return &domain.Error{Code: domain.CodeFailedPrecondition, Field: "ports",
				Message: fmt.Sprintf("port %s moves from %q to %q in one revision: its old membership must be removed (and deployed) first", k, cur.Member, want)}
		}
		leaf, _, _ := strings.Cut(k, "/")
		if d := fd.Devices[leaf]; cur.Rev != 0 && (d == nil || d.DeployedRev < cur.Rev) {
			return &domain.Error{Code: domain.CodeFailedPrecondition, Field: "ports",
				Message: fmt.Sprintf("port %s joins %q before the removal of its previous membership (revision %d) is deployed on %s", k, want, cur.Rev, leaf)}
		}
	}
	return nil
}

// prunePorts forgets ports without a membership once their removal is
// deployed on their leaf (or the leaf left the fabric).
func (f *FSM) prunePorts() {
	fd := &f.d.Fabric
	for k, pm := range fd.Ports {
		leaf, _, _ := strings.Cut(k, "/")
		d := fd.Devices[leaf]
		if d == nil || (pm.Member == "" && d.DeployedRev >= pm.Rev) {
			delete(fd.Ports, k)
		}
	}
}

// PortMembers returns every server port's membership in the latest
// revision and each device's deployed revision.
func (f *FSM) PortMembers() (map[string]PortMember, map[string]uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	deployed := map[string]uint64{}
	for name, d := range f.d.Fabric.Devices {
		deployed[name] = d.DeployedRev
	}
	return maps.Clone(f.d.Fabric.Ports), deployed
}

// foldRevisions keeps maxRevisions revisions: the oldest dropped one's
// device configs move into the next unless that one changed them too.
//
// The latest revision that is not blocked (deployableLocked) is never
// dropped: it is what the devices are given while newer ones are blocked.
// When it is the oldest, the blocked revision after it folds into the next
// instead, its removals carried along.
func (f *FSM) foldRevisions() {
	fd := &f.d.Fabric
	for len(fd.Revisions) > maxRevisions {
		i := 0
		if fd.Revisions[0].Rev == f.deployableLocked() {
			i = 1
		}
		old, next := fd.Revisions[i], fd.Revisions[i+1]
		if next.Changed == nil {
			next.Changed = map[string]DeviceConfig{}
		}
		for name, dc := range old.Changed {
			if _, ok := next.Changed[name]; !ok && !slices.Contains(next.Removed, name) {
				next.Changed[name] = dc
			}
		}
		if i > 0 {
			for _, name := range old.Removed {
				if _, ok := next.Changed[name]; !ok && !slices.Contains(next.Removed, name) {
					next.Removed = append(next.Removed, name)
				}
			}
			slices.Sort(next.Removed)
		}
		fd.Revisions = slices.Delete(fd.Revisions, i, i+1)
	}
}

// removalsBehind is what a revision the devices are given, after the kept
// revisions rs, removes from the state's devices: its own removals and
// those of the blocked revisions at the end of rs (in order), but not a device it or a later
// blocked revision configures again. A blocked revision removes nobody: no
// device is given it, so a switch it drops still runs the deployable
// revision, and its deploys must still be recorded (applyFabricDeployed
// skips devices not in the state) and count for the pools (markDeployed).
func removalsBehind(rs []*FabricRevision, changed map[string]DeviceConfig, own []string) []string {
	i := len(rs)
	for i > 0 && rs[i-1].Blocked {
		i--
	}
	gone := map[string]bool{}
	for _, r := range rs[i:] {
		for _, name := range r.Removed {
			gone[name] = true
		}
		for name := range r.Changed {
			delete(gone, name)
		}
	}
	for name := range changed {
		delete(gone, name)
	}
	for _, name := range own {
		gone[name] = true
	}
	return slices.Sorted(maps.Keys(gone))
}

// deployableLocked is the latest kept revision that is not blocked, the
// one the devices are given; 0 when every kept revision is blocked.
func (f *FSM) deployableLocked() uint64 {
	rs := f.d.Fabric.Revisions
	for i := len(rs) - 1; i >= 0; i-- {
		if !rs[i].Blocked {
			return rs[i].Rev
		}
	}
	return 0
}

// DeployTarget returns every device's configuration at the revision the
// devices are to run, the latest one that is not blocked, and that
// revision (0, and no configurations, when there is none).
func (f *FSM) DeployTarget() (map[string]DeviceConfig, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rev := f.deployableLocked()
	if rev == 0 {
		return map[string]DeviceConfig{}, 0
	}
	cfgs, _, _ := f.deviceConfigsLocked(rev) // kept: listed above
	return cfgs, rev
}

// applyFabricOverride unblocks the latest revision: an admin lets the
// devices have it although the verifier failed on it.
func (f *FSM) applyFabricOverride(c *Command) (any, *domain.Error) {
	p, derr := decode[FabricOverrideCmd](c)
	if derr != nil {
		return nil, derr
	}
	fd := &f.d.Fabric
	if len(fd.Revisions) == 0 || p.Rev != fd.Rev {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "rev",
			Message: fmt.Sprintf("revision %d is not the latest (%d): only the latest revision can be deployed over the verifier", p.Rev, fd.Rev)}
	}
	r := fd.Revisions[len(fd.Revisions)-1]
	if !r.Blocked {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "rev",
			Message: fmt.Sprintf("revision %d is not blocked: nothing to override", p.Rev)}
	}
	if strings.TrimSpace(p.Reason) == "" {
		return nil, domain.Invalid("reason", "overriding the verifier needs a reason (it is in the events)")
	}
	if c.check {
		return nil, nil
	}
	// The blocked revisions' removals up to this one take effect now.
	var removed []string
	if c.rules() >= RulesBlockedKeepsDevices {
		removed = removalsBehind(fd.Revisions[:len(fd.Revisions)-1], r.Changed, r.Removed)
	}
	for _, name := range removed {
		delete(fd.Devices, name)
	}
	r.Blocked, r.Override = false, c.Actor+": "+p.Reason
	f.event(c, "fabric.override", fmt.Sprintf("fabric/%d", r.Rev), "", "",
		fmt.Sprintf("revision %d deployed although the verifier failed on it (%d failures, first: %s), by %s: %s", r.Rev, len(r.Verify), r.Verify[0], c.Actor, p.Reason))
	f.gate(c)
	return f.fabricStatusLocked(), nil
}

func (f *FSM) applyFabricDeployed(c *Command) (any, *domain.Error) {
	p, derr := decode[FabricDeployedCmd](c)
	if derr != nil {
		return nil, derr
	}
	fd := &f.d.Fabric
	if p.Rev == 0 || p.Rev > fd.Rev {
		return nil, domain.Invalid("rev", "revision %d does not exist (latest %d)", p.Rev, fd.Rev)
	}
	if c.check {
		return nil, nil
	}
	var ok, failed []string
	for _, r := range p.Results {
		d := fd.Devices[r.Device]
		if d == nil {
			continue // removed since
		}
		d.UpdatedAt = c.At
		d.Conditions = r.Conditions
		if r.Error != "" {
			d.Error = r.Error
			failed = append(failed, r.Device)
			continue
		}
		d.Error = ""
		switch {
		case r.Hash == d.DesiredHash:
			// It runs the config the latest revision wants: it runs that
			// revision, whichever it was deploying. (Recorded at p.Rev, a
			// device whose deploy ended after a revision that left its
			// config alone stayed behind for good: no round redeploys a
			// device that runs its desired config, and the jobs of that
			// revision waited for it.)
			d.DeployedRev, d.Deployed = fd.Rev, r.Hash
		case p.Rev >= d.DeployedRev:
			d.DeployedRev, d.Deployed = p.Rev, r.Hash
		}
		ok = append(ok, r.Device)
	}
	if len(failed) > 0 {
		f.event(c, "fabric.deploy", fmt.Sprintf("fabric/%d", p.Rev), "", "", fmt.Sprintf("revision %d: %d devices applied, failed: %s", p.Rev, len(ok), strings.Join(failed, ", ")))
	} else {
		f.event(c, "fabric.deploy", fmt.Sprintf("fabric/%d", p.Rev), "", "", fmt.Sprintf("revision %d: %d devices applied", p.Rev, len(ok)))
	}
	f.markDeployed(c.At)
	f.prunePorts()
	f.gate(c)
	return f.fabricStatusLocked(), nil
}

// markDeployed tells the pools which ids the devices may be running: those
// of every revision from the oldest any device still runs to the newest.
func (f *FSM) markDeployed(now time.Time) {
	fd := &f.d.Fabric
	if fd.Pools == nil {
		return
	}
	oldest := fd.Rev
	for _, d := range fd.Devices {
		oldest = min(oldest, d.DeployedRev)
	}
	ids := map[string][]uint32{}
	for _, r := range fd.Revisions {
		if r.Rev < oldest {
			continue
		}
		ids[pool.VNI] = append(ids[pool.VNI], r.InUse.VNIs...)
		ids[pool.VRFID] = append(ids[pool.VRFID], r.InUse.VRFIDs...)
		ids[pool.RT] = append(ids[pool.RT], r.InUse.RTs...)
		ids[pool.Group] = append(ids[pool.Group], r.InUse.Groups...)
		ids[pool.L3VLAN] = append(ids[pool.L3VLAN], r.InUse.L3VLANs...)
		for leaf, v := range r.InUse.LinkVLANs {
			ids[pool.LinkVLAN(leaf)] = append(ids[pool.LinkVLAN(leaf)], v...)
		}
		for leaf, v := range r.InUse.LeafL3VLANs {
			ids[pool.LeafL3VLAN(leaf)] = append(ids[pool.LeafL3VLAN(leaf)], v...)
		}
	}
	for _, name := range fd.Pools.Names() {
		_ = fd.Pools.SetDeployed(name, ids[name], now) // every name exists: listed by Names
	}
}

// gate makes Placed jobs Ready once the revision carrying their network is
// deployed on every leaf their GPUs use, and says what a job waits for.
func (f *FSM) gate(c *Command) {
	fd := &f.d.Fabric
	for j := range f.jobs.liveJobs() {
		if j.State != domain.JobPlaced || j.NetworkRev == 0 {
			continue
		}
		var waiting []string
		for _, leaf := range f.jobLeaves(j) {
			d := fd.Devices[leaf]
			switch {
			case d == nil:
				waiting = append(waiting, leaf+" (not in the fabric)")
			case d.DeployedRev < j.NetworkRev && d.Error != "":
				// Not the device's error: a switch's or the lint's account
				// names the VRFs on it, other tenants' too (`fabric
				// status` has it, for the admin).
				waiting = append(waiting, leaf+" (deploy failed; retried by the leader)")
			case d.DeployedRev < j.NetworkRev:
				waiting = append(waiting, leaf)
			}
		}
		if len(waiting) == 0 {
			j.State, j.UpdatedAt = domain.JobReady, c.At
			f.jobs.touch(j)
			j.Reason = &domain.Reason{Code: "ready", Message: fmt.Sprintf("network ready (fabric revision %d deployed on its leaves): its runtime may start it", j.NetworkRev)}
			f.event(c, "job.ready", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, fmt.Sprintf("network revision %d deployed on %s", j.NetworkRev, strings.Join(f.jobLeaves(j), ", ")))
			continue
		}
		r := domain.Reason{Code: domain.ReasonNetwork, Message: fmt.Sprintf("waiting for fabric revision %d on %s", j.NetworkRev, strings.Join(waiting, ", "))}
		if good := f.deployableLocked(); good < j.NetworkRev {
			// Not the failures: they may name other tenants.
			r.Message = fmt.Sprintf("waiting for fabric revision %d on %s: the verifier failed on the fabric's configuration, so no switch is given revision %d or later; the switches stay on revision %d until a revision verifies (or an admin overrides it)", j.NetworkRev, strings.Join(waiting, ", "), good+1, good)
		}
		if j.Reason == nil || *j.Reason != r {
			j.Reason, j.UpdatedAt = &r, c.At
			f.jobs.touch(j)
		}
	}
}

// fingerprintItem hashes one item of a fingerprint sum. FNV alone will not
// do: its last step is linear in the last byte, so two devices whose
// deployed revision goes from 6 to 7 together can leave the sum unchanged
// (one item +1, the other -1), and the compile a held job waits for never
// comes. The finalizer (murmur3's fmix64) breaks that.
func fingerprintItem(format string, args ...any) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, format, args...)
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// FabricFingerprint hashes everything a compile reads (topology, tenants,
// the allocations of jobs holding GPUs, the latest revision): the leader
// compiles only when it changed, not on every submit.
func (f *FSM) FabricFingerprint() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.d.Topology == nil {
		return 0
	}
	// A sum of per-item hashes: independent of map order, so no sorting
	// (this runs after every change, with the apply lock waiting).
	item := fingerprintItem
	sum := item("%s|%d|%d|%s|%d-%d", f.d.Fingerprint, f.d.TopologyRev, f.d.Fabric.Rev, f.d.Fabric.Options.VRFPlacement, f.d.Fabric.L3VLANMin, f.d.Fabric.L3VLANMax)
	sum += f.fingerprintTenants.of(f.d.Tenants)
	sum += f.fingerprintJobs.of(f)
	// A held job waits for a deploy: compile again after each. (Not one
	// held for the verifier: a deploy changes nothing it fails on.)
	if slices.ContainsFunc(f.d.Fabric.Held, func(h HeldJob) bool { return h.Why != "verify" }) {
		for name, d := range f.d.Fabric.Devices {
			sum += item("d|%s|%d", name, d.DeployedRev)
		}
	}
	return sum
}

// jobFingerprint is a job's part of the fabric fingerprint: 0 for a job
// that holds no GPUs (or is gone).
func jobFingerprint(j *domain.Job) uint64 {
	if j == nil || !holdsGPUs(j) { // a job holding GPUs is live
		return 0
	}
	return fingerprintItem("j|%d|%s|%t|%v", j.ID, j.Tenant, j.State == domain.JobPlaced && j.NetworkRev == 0, j.Placement)
}

// tenantFingerprint is a tenant's part of the fabric fingerprint.
func tenantFingerprint(t *domain.Tenant) uint64 {
	return fingerprintItem("t|%s|%s|%s|%t|%v", t.Name, t.Isolation, t.Network, t.JobSegmentation, t.Sites)
}

// tenantsFingerprint keeps each tenant's part of FabricFingerprint by the
// record it was hashed from: apply replaces a tenant's record when it
// changes it (never in place), so the same pointer hashes the same. With
// 5,000 tenants hashing them all took 10 ms of every fingerprint.
type tenantsFingerprint struct {
	mu    sync.Mutex
	items map[string]tenantItem
}

type tenantItem struct {
	t *domain.Tenant
	x uint64
}

func (p *tenantsFingerprint) of(tenants map[string]*domain.Tenant) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.items == nil {
		p.items = make(map[string]tenantItem, len(tenants))
	}
	var sum uint64
	for name, t := range tenants {
		it, ok := p.items[name]
		if !ok || it.t != t {
			it = tenantItem{t: t, x: tenantFingerprint(t)}
			p.items[name] = it
		}
		sum += it.x
	}
	if len(p.items) > len(tenants) {
		for name := range p.items {
			if _, ok := tenants[name]; !ok {
				delete(p.items, name) // deleted tenant
			}
		}
	}
	return sum
}

// jobsFingerprint keeps the jobs' part of FabricFingerprint between calls:
// the fabric loop asks after every change, and hashing every live job each
// time cost it a pass over 100,000 pending jobs under the read lock. It
// hashes again only the jobs the change log names. Guarded by mu: readers
// share the state's read lock.
type jobsFingerprint struct {
	mu    sync.Mutex
	at    changeCursor      // sum is current as of it
	items map[uint64]uint64 // the jobs holding GPUs, by ID
	sum   uint64
}

// of is the sum of the jobs' items, f's read lock held.
func (p *jobsFingerprint) of(f *FSM) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed, ok := p.at.next(&f.jobs.vers)
	if !ok {
		p.items, p.sum = map[uint64]uint64{}, 0
		for j := range f.jobs.liveJobs() {
			if x := jobFingerprint(j); x != 0 {
				p.items[j.ID], p.sum = x, p.sum+x
			}
		}
	} else {
		for _, id := range changed {
			p.sum -= p.items[id]
			delete(p.items, id)
			if x := jobFingerprint(f.d.Jobs[id]); x != 0 {
				p.items[id], p.sum = x, p.sum+x
			}
		}
	}
	return p.sum
}

// JobsAwaitingNetwork lists Placed jobs no revision carries yet.
func (f *FSM) JobsAwaitingNetwork() []uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []uint64
	for j := range f.listed(listKey{listState, string(domain.JobPlaced)}, 0) { // not every live job (readindex.go)
		if j.State == domain.JobPlaced && j.NetworkRev == 0 {
			out = append(out, j.ID)
		}
	}
	return out
}

// jobLeaves are the leaves where the job has links, sorted: those of its
// GPUs' NICs, and every leaf of a server it holds whole (a server-isolated
// tenant's, or all of a server's GPUs), whose every link, NICs without a
// GPU of their own included, the compiler gives the job's tenant (as
// fabricInput marks Whole).
func (f *FSM) jobLeaves(j *domain.Job) []string {
	var out []string
	serverIso := false
	if t, ok := f.d.Tenants[j.Tenant]; ok {
		serverIso = t.Isolation == domain.IsolationServer
	}
	for _, p := range j.Placement {
		out = append(out, p.Leaves...)
		s, ok := f.cap.servers[p.Server]
		if serverIso || (ok && len(p.GPUs) == s.GPUs && len(p.MIG) == 0 && p.Share == 0) {
			out = append(out, f.cap.serverLeaves[p.Server]...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FabricStatus is the fabric as the state knows it.
type FabricStatus struct {
	Revision uint64 `json:"revision"`
	// Deployable is the revision the devices are given: the latest one
	// the verifier did not block (Revision when it is not blocked).
	Deployable uint64 `json:"deployable"`
	// Blocked says why the revisions after Deployable are not deployed:
	// "verify failed: " and the latest one's first failure.
	Blocked string        `json:"blocked,omitempty"`
	Devices []DeviceState `json:"devices"`
}

// FabricStatus reports the latest revision and every device.
func (f *FSM) FabricStatus() *FabricStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.fabricStatusLocked()
}

func (f *FSM) fabricStatusLocked() *FabricStatus {
	st := &FabricStatus{Revision: f.d.Fabric.Rev, Deployable: f.deployableLocked(), Devices: []DeviceState{}}
	if rs := f.d.Fabric.Revisions; len(rs) > 0 && rs[len(rs)-1].Blocked {
		r := rs[len(rs)-1]
		st.Blocked = fmt.Sprintf("verify failed: revision %d (%d failures): %s", r.Rev, len(r.Verify), r.Verify[0])
	}
	for _, name := range slices.Sorted(maps.Keys(f.d.Fabric.Devices)) {
		st.Devices = append(st.Devices, *f.d.Fabric.Devices[name])
	}
	return st
}

// RevisionInfo summarises a kept revision.
type RevisionInfo struct {
	Rev     uint64    `json:"rev"`
	At      time.Time `json:"at"`
	Cause   string    `json:"cause,omitempty"`
	Changed []string  `json:"changed"`
	Removed []string  `json:"removed,omitempty"`
	Verify  []string  `json:"verify,omitempty"`
	// Blocked: the verifier failed on it, no device is given it.
	Blocked bool `json:"blocked,omitempty"`
	// Override is the admin who had it deployed anyway, and why.
	Override string `json:"override,omitempty"`
}

// FabricRevisions lists the kept revisions, oldest first.
func (f *FSM) FabricRevisions() []RevisionInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []RevisionInfo{}
	for _, r := range f.d.Fabric.Revisions {
		out = append(out, RevisionInfo{Rev: r.Rev, At: r.At, Cause: r.Cause, Changed: slices.Sorted(maps.Keys(r.Changed)), Removed: slices.Clone(r.Removed), Verify: slices.Clone(r.Verify), Blocked: r.Blocked, Override: r.Override})
	}
	return out
}

// DeviceConfigs returns every device's configuration at revision rev (0:
// the latest), or not_found when rev is not kept.
func (f *FSM) DeviceConfigs(rev uint64) (map[string]DeviceConfig, uint64, *domain.Error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.deviceConfigsLocked(rev)
}

func (f *FSM) deviceConfigsLocked(rev uint64) (map[string]DeviceConfig, uint64, *domain.Error) {
	fd := &f.d.Fabric
	if rev == 0 {
		rev = fd.Rev
	}
	if rev == 0 {
		return map[string]DeviceConfig{}, 0, nil
	}
	if len(fd.Revisions) == 0 || rev < fd.Revisions[0].Rev || rev > fd.Rev {
		first := uint64(0)
		if len(fd.Revisions) > 0 {
			first = fd.Revisions[0].Rev
		}
		return nil, 0, &domain.Error{Code: domain.CodeNotFound, Field: "rev", Message: fmt.Sprintf("revision %d is not kept (kept: %d-%d)", rev, first, fd.Rev)}
	}
	// A blocked revision folded away behind the deployable one is a gap.
	if _, found := slices.BinarySearchFunc(fd.Revisions, rev, func(r *FabricRevision, rev uint64) int { return cmp.Compare(r.Rev, rev) }); !found {
		return nil, 0, &domain.Error{Code: domain.CodeNotFound, Field: "rev", Message: fmt.Sprintf("revision %d is not kept (a blocked revision folded into the next)", rev)}
	}
	out := map[string]DeviceConfig{}
	for _, r := range fd.Revisions {
		if r.Rev > rev {
			break
		}
		for _, name := range r.Removed {
			delete(out, name)
		}
		for name, dc := range r.Changed {
			out[name] = dc
		}
	}
	return out, rev, nil
}

// HeldJobs are the jobs the latest revision held out.
func (f *FSM) HeldJobs() []HeldJob {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.d.Fabric.Held)
}
