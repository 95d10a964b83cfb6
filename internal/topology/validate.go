package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
)

// Bounds of the inventory. They are far above real hardware and exist so a
// typo (gpus: 80000) is refused instead of sizing tables after it.
const (
	maxGPUsPerServer = 1024
	maxPorts         = 1024
	maxNUMA          = 63
	maxASN           = 4294967294 // 4294967295 is reserved (RFC 7300)
	maxPortPrefixLen = 32
	maxPods          = 1024
)

// NOSes the fabric renderers know.
var knownNOS = []string{"eos", "frr", "junos", "nxos", "sonic"}

// Validate checks a normalized topology against every rule and reports all
// problems at once (the first 100 are listed) in one invalid_argument
// *domain.Error. Each Detail names the JSON path (Field), the object in
// words (Object, e.g. "cable s1-gpu001/nic0 -> s1-leaf0/swp9"), a stable
// rule id (Rule) and the value that broke it (Message). It returns nil when
// the topology is valid.
//
// Rule ids: api-version, kind, required, name, duplicate-name, asn-range,
// loopback, port-count, port-prefix, nos, platform, platform-required,
// nos-version, nos-feature, breakout, leaf-rail, duplicate-rail,
// spine-rail, gpu-model-known, gpu-count, gpu-numa, stripe-range,
// nvlink-domain, nic-numa, nic-gpu-index, nic-rail-range, nic-rail-duplicate,
// rdma-device-duplicate, rail-nic-count, stripe-exists, stripe-rail-leaf,
// device-exists, port-exists, port-cabled-once, nic-cabled-once, nic-cabled,
// rail-match, stripe-match, link-address, link-address-overlap, link-pool,
// pod, pod-match, spine-uplink.
func Validate(t *domain.Topology) *domain.Error {
	if t == nil {
		return domain.Invalid("", "no topology given")
	}
	v := &validator{devices: map[string]device{}, nvl: map[string]nvlDomain{}}
	v.run(t)
	return v.ps.err("topology")
}

type validator struct {
	ps      problems
	devices map[string]device // switch and server names share one namespace (hostnames)
	nvl     map[string]nvlDomain
	addrs   []addrUse
}

type device struct {
	kind   string // "super-spine", "spine", "leaf" or "server"
	path   string
	fabric string // site/fabric
}

type nvlDomain struct {
	fabric, model, server, path string
}

// addrUse is one address claimed by a link or a loopback, for the overlap sweep.
type addrUse struct {
	p        netip.Prefix
	field    string
	object   string
	loopback bool
}

// fabricScope holds what the rules of one fabric look things up in.
type fabricScope struct {
	path, ref string
	f         *domain.Fabric
	leaves    map[string]*domain.Switch
	spines    map[string]*domain.Switch
	supers    map[string]*domain.Switch
	servers   map[string]*domain.Server
	ports     map[string]string // "switch\x00port" -> what uses it
	// portSpace is each switch's ports as its platform names them; nil
	// for a switch whose platform is invalid (its ports are not checked).
	portSpace map[string]*platform.Ports
	nics      map[nicKey]string // -> the cable using it
	// stripeRails[stripe][rail] says a leaf serves that rail of that stripe.
	stripeRails map[int]map[int]bool
}

func (v *validator) run(t *domain.Topology) {
	if t.APIVersion != "" && t.APIVersion != APIVersion {
		v.ps.add("apiVersion", "", "api-version", "apiVersion %q is not supported; use %q", t.APIVersion, APIVersion)
	}
	if t.Kind != "" && t.Kind != Kind {
		v.ps.add("kind", "", "kind", "kind %q is not a topology; use %q", t.Kind, Kind)
	}
	if len(t.Sites) == 0 {
		v.ps.add("sites", "", "required", "a topology needs at least one site")
	}
	// Pass 1: names, so that pass 2 can tell "no such server" from "that
	// server is in another fabric" wherever the definitions sit in the file.
	sites := map[string]string{}
	for si := range t.Sites {
		site := &t.Sites[si]
		sp := fmt.Sprintf("sites[%d]", si)
		if v.name(sp+".name", "site "+site.Name, "site name", site.Name) {
			v.unique(sites, site.Name, sp, sp+".name", "site "+site.Name, "site name")
		}
		fabrics := map[string]string{}
		for fi := range site.Fabrics {
			f := &site.Fabrics[fi]
			fp := fmt.Sprintf("%s.fabrics[%d]", sp, fi)
			ref := domain.Ref(site.Name, f.Name)
			if v.name(fp+".name", "fabric "+ref, "fabric name", f.Name) {
				v.unique(fabrics, f.Name, fp, fp+".name", "fabric "+ref, "fabric name in site "+site.Name)
			}
			for i := range f.SuperSpines {
				v.device("super-spine", fmt.Sprintf("%s.superSpines[%d]", fp, i), ref, f.SuperSpines[i].Name)
			}
			for i := range f.Spines {
				v.device("spine", fmt.Sprintf("%s.spines[%d]", fp, i), ref, f.Spines[i].Name)
			}
			for i := range f.Leaves {
				v.device("leaf", fmt.Sprintf("%s.leaves[%d]", fp, i), ref, f.Leaves[i].Name)
			}
			for i := range f.Servers {
				v.device("server", fmt.Sprintf("%s.servers[%d]", fp, i), ref, f.Servers[i].Name)
			}
		}
	}
	// Pass 2: everything else, fabric by fabric.
	for si := range t.Sites {
		for fi := range t.Sites[si].Fabrics {
			f := &t.Sites[si].Fabrics[fi]
			v.fabric(&fabricScope{
				path: fmt.Sprintf("sites[%d].fabrics[%d]", si, fi), ref: domain.Ref(t.Sites[si].Name, f.Name), f: f,
				leaves: map[string]*domain.Switch{}, spines: map[string]*domain.Switch{}, supers: map[string]*domain.Switch{}, servers: map[string]*domain.Server{},
				ports: map[string]string{}, portSpace: map[string]*platform.Ports{}, nics: map[nicKey]string{}, stripeRails: map[int]map[int]bool{},
			})
		}
	}
	v.overlaps()
}

// name checks a name and reports whether it is valid (so that duplicates of
// an invalid name are not reported twice).
func (v *validator) name(field, object, what, name string) bool {
	if e := domain.ValidateName(what, name); e != nil {
		v.ps.add(field, object, "name", "%s", e.Message)
		return false
	}
	return true
}

func (v *validator) unique(seen map[string]string, name, path, field, object, what string) {
	if first, ok := seen[name]; ok {
		v.ps.add(field, object, "duplicate-name", "%s %q is already used at %s", what, name, first)
		return
	}
	seen[name] = path
}

func (v *validator) device(kind, path, fabric, name string) {
	if !v.name(path+".name", kind+" "+name, kind+" name", name) {
		return
	}
	if d, ok := v.devices[name]; ok {
		v.ps.add(path+".name", kind+" "+name, "duplicate-name",
			"%s name %q is already used by the %s at %s (switch and server names are unique across the topology)", kind, name, d.kind, d.path)
		return
	}
	v.devices[name] = device{kind: kind, path: path, fabric: fabric}
}

func (v *validator) fabric(s *fabricScope) {
	f := s.f
	if f.LinkPools.IPv4 != "" {
		if _, err := parsePool(f.LinkPools.IPv4, false); err != nil {
			v.ps.add(s.path+".linkPools.ipv4", "fabric "+s.ref, "link-pool", "IPv4 link pool %q is %v", f.LinkPools.IPv4, err)
		}
	}
	if f.LinkPools.IPv6 != "" {
		if _, err := parsePool(f.LinkPools.IPv6, true); err != nil {
			v.ps.add(s.path+".linkPools.ipv6", "fabric "+s.ref, "link-pool", "IPv6 link pool %q is %v", f.LinkPools.IPv6, err)
		}
	}
	for i := range f.Spines {
		sw := &f.Spines[i]
		p := fmt.Sprintf("%s.spines[%d]", s.path, i)
		v.switchCommon(s, p, "spine", sw)
		if sw.Stripe != nil || sw.Rail != nil {
			v.ps.add(p, "spine "+sw.Name, "spine-rail", "spine %s sets stripe or rail; only leaves serve a stripe and a rail", sw.Name)
		}
		v.pod(s, p, "spine", sw)
		if _, dup := s.spines[sw.Name]; !dup {
			s.spines[sw.Name] = sw
		}
	}
	for i := range f.SuperSpines {
		sw := &f.SuperSpines[i]
		p := fmt.Sprintf("%s.superSpines[%d]", s.path, i)
		v.switchCommon(s, p, "super-spine", sw)
		if sw.Stripe != nil || sw.Rail != nil || sw.Pod != nil {
			v.ps.add(p, "super-spine "+sw.Name, "spine-rail", "super-spine %s sets stripe, rail or pod; a super-spine joins every pod and serves no stripe", sw.Name)
		}
		if _, dup := s.supers[sw.Name]; !dup {
			s.supers[sw.Name] = sw
		}
	}
	railOwner := map[[2]int]string{}
	for i := range f.Leaves {
		sw := &f.Leaves[i]
		p := fmt.Sprintf("%s.leaves[%d]", s.path, i)
		obj := "leaf " + sw.Name
		v.switchCommon(s, p, "leaf", sw)
		v.pod(s, p, "leaf", sw)
		if _, dup := s.leaves[sw.Name]; !dup {
			s.leaves[sw.Name] = sw
		}
		if sw.Stripe != nil && *sw.Stripe < 0 {
			v.ps.add(p+".stripe", obj, "leaf-rail", "leaf %s has stripe %d; stripes are numbered from 0", sw.Name, *sw.Stripe)
		}
		if sw.Rail != nil && (*sw.Rail < 0 || *sw.Rail >= maxGPUsPerServer) {
			v.ps.add(p+".rail", obj, "leaf-rail", "leaf %s has rail %d; rails are 0..%d", sw.Name, *sw.Rail, maxGPUsPerServer-1)
		}
		if f.RailOptimized && (sw.Stripe == nil || sw.Rail == nil) {
			missing := "stripe"
			if sw.Stripe != nil {
				missing = "rail"
			}
			v.ps.add(p+"."+missing, obj, "leaf-rail", "leaf %s of rail-optimized fabric %s has no %s", sw.Name, s.ref, missing)
		}
		if sw.Stripe != nil && sw.Rail != nil {
			k := [2]int{*sw.Stripe, *sw.Rail}
			if other, ok := railOwner[k]; ok {
				v.ps.add(p+".rail", obj, "duplicate-rail", "leaf %s serves stripe %d rail %d, which leaf %s already serves", sw.Name, k[0], k[1], other)
			} else {
				railOwner[k] = sw.Name
			}
			if s.stripeRails[k[0]] == nil {
				s.stripeRails[k[0]] = map[int]bool{}
			}
			s.stripeRails[k[0]][k[1]] = true
		}
	}
	missingRail := map[[2]int]bool{} // reported once per stripe and rail, not once per server
	for i := range f.Servers {
		srv := &f.Servers[i]
		if _, dup := s.servers[srv.Name]; !dup {
			s.servers[srv.Name] = srv
		}
		v.server(s, fmt.Sprintf("%s.servers[%d]", s.path, i), srv, missingRail)
	}
	for i := range f.Cables {
		v.cable(s, fmt.Sprintf("%s.cables[%d]", s.path, i), &f.Cables[i])
	}
	unnumbered := map[string]bool{}
	for i := range f.Uplinks {
		u := &f.Uplinks[i]
		v.uplink(s, fmt.Sprintf("%s.uplinks[%d]", s.path, i), u)
		if u.IPv4 == "" {
			unnumbered[u.Leaf], unnumbered[u.Spine] = true, true
		}
	}
	superLinked := map[string]bool{}
	for i := range f.SpineUplinks {
		u := &f.SpineUplinks[i]
		v.spineUplink(s, fmt.Sprintf("%s.spineUplinks[%d]", s.path, i), u)
		superLinked[u.Spine] = true
		if u.IPv4 == "" {
			unnumbered[u.Spine], unnumbered[u.SuperSpine] = true, true
		}
	}
	for i := range f.Spines {
		sp := &f.Spines[i]
		if f.ThreeTier() && !superLinked[sp.Name] {
			v.ps.add(fmt.Sprintf("%s.spines[%d]", s.path, i), "spine "+sp.Name, "spine-uplink",
				"spine %s of three-tier fabric %s has no link to a super-spine (spineUplinks): its pod would be cut off from the others", sp.Name, s.ref)
		}
		v.features(s, fmt.Sprintf("%s.spines[%d]", s.path, i), "spine", sp, unnumbered[sp.Name])
	}
	for i := range f.SuperSpines {
		v.features(s, fmt.Sprintf("%s.superSpines[%d]", s.path, i), "super-spine", &f.SuperSpines[i], unnumbered[f.SuperSpines[i].Name])
	}
	for i := range f.Leaves {
		v.features(s, fmt.Sprintf("%s.leaves[%d]", s.path, i), "leaf", &f.Leaves[i], unnumbered[f.Leaves[i].Name])
	}
	if f.RailOptimized {
		for i := range f.Servers {
			srv := &f.Servers[i]
			for j, nic := range srv.NICs {
				if _, ok := s.nics[nicKey{srv.Name, nic.Name}]; !ok {
					v.ps.add(fmt.Sprintf("%s.servers[%d].nics[%d]", s.path, i, j), "nic "+srv.Name+"/"+nic.Name, "nic-cabled",
						"NIC %s/%s (rail %d) has no cable; in rail-optimized fabric %s every NIC connects to the leaf of its rail", srv.Name, nic.Name, nic.Rail, s.ref)
				}
			}
		}
	}
}

// pod checks the pod of a leaf or spine: required in a three-tier fabric
// (leaves and spines are grouped into pods under the super-spines),
// meaningless in a two-tier one.
func (v *validator) pod(s *fabricScope, p, kind string, sw *domain.Switch) {
	obj := kind + " " + sw.Name
	switch {
	case s.f.ThreeTier() && sw.Pod == nil:
		v.ps.add(p+".pod", obj, "pod", "%s %s of three-tier fabric %s (it has super-spines) has no pod", kind, sw.Name, s.ref)
	case !s.f.ThreeTier() && sw.Pod != nil:
		v.ps.add(p+".pod", obj, "pod", "%s %s sets pod %d, but fabric %s has no super-spines: pods exist only in a three-tier fabric", kind, sw.Name, *sw.Pod, s.ref)
	case sw.Pod != nil && (*sw.Pod < 1 || *sw.Pod > maxPods):
		v.ps.add(p+".pod", obj, "pod", "%s %s has pod %d; pods are 1..%d", kind, sw.Name, *sw.Pod, maxPods)
	}
}

func (v *validator) switchCommon(s *fabricScope, p, kind string, sw *domain.Switch) {
	obj := kind + " " + sw.Name
	if sw.ASN == 0 || sw.ASN > maxASN {
		v.ps.add(p+".asn", obj, "asn-range", "%s %s has ASN %d; an ASN is 1..%d", kind, sw.Name, sw.ASN, uint32(maxASN))
	}
	if sw.Loopback == "" {
		v.ps.add(p+".loopback", obj, "loopback", "%s %s has no loopback address", kind, sw.Name)
	} else if a, err := parseLoopback(sw.Loopback); err != nil {
		v.ps.add(p+".loopback", obj, "loopback", "%s %s loopback %q is %v", kind, sw.Name, sw.Loopback, err)
	} else {
		v.addrs = append(v.addrs, addrUse{p: netip.PrefixFrom(a, 32), field: p + ".loopback", object: obj, loopback: true})
	}
	if sw.PortCount < 1 || sw.PortCount > maxPorts {
		v.ps.add(p+".portCount", obj, "port-count", "%s %s has portCount %d; it must be 1..%d", kind, sw.Name, sw.PortCount, maxPorts)
	}
	if pp := sw.PortPrefix; pp != "" && !validPortPrefix(pp) {
		v.ps.add(p+".portPrefix", obj, "port-prefix", "%s %s has portPrefix %q; it must be 1-%d printable characters without spaces", kind, sw.Name, pp, maxPortPrefixLen)
	}
	if sw.NOS != "" && !slices.Contains(knownNOS, sw.NOS) {
		v.ps.add(p+".nos", obj, "nos", "%s %s has nos %q; known: %s", kind, sw.Name, sw.NOS, strings.Join(knownNOS, ", "))
		return
	}
	if _, dup := s.portSpace[sw.Name]; !dup {
		s.portSpace[sw.Name] = v.switchPlatform(p, kind, sw)
	}
}

// switchPlatform checks a switch's platform, version and breakouts and
// returns its port space (nil when the platform is unusable).
func (v *validator) switchPlatform(p, kind string, sw *domain.Switch) *platform.Ports {
	obj := kind + " " + sw.Name
	nos := sw.NOS
	if nos == "" {
		nos = platform.FRR // the compiler's default NOS
	}
	pl := sw.Platform
	if pl == nil {
		if nos != platform.FRR {
			v.ps.add(p+".platform", obj, "platform-required",
				"%s %s runs %s but names no platform; %s port names and features depend on the model: set platform {vendor, model, version} (models running %s: %s)",
				kind, sw.Name, nos, nos, nos, strings.Join(platform.ModelNames(nos), ", "))
			return nil
		}
		m, _ := platform.Lookup(platform.GenericVendor, platform.GenericModel)
		pl = &domain.Platform{Vendor: m.Vendor, Model: m.Name}
	}
	m, ok := platform.Lookup(pl.Vendor, pl.Model)
	if !ok {
		v.ps.add(p+".platform.model", obj, "platform", "%s %s has platform %s/%s, which is not known; known: %s",
			kind, sw.Name, pl.Vendor, pl.Model, strings.Join(platform.ModelNames(""), ", "))
		return nil
	}
	if !m.Runs(nos) {
		v.ps.add(p+".platform.model", obj, "platform", "%s %s runs %s, but %s/%s runs %s; models running %s: %s",
			kind, sw.Name, nos, m.Vendor, m.Name, strings.Join(m.NOSes, ", "), nos, strings.Join(platform.ModelNames(nos), ", "))
		return nil
	}
	if pl.Version == "" && !m.Generic() {
		d, _ := platform.DefaultFor(nos)
		v.ps.add(p+".platform.version", obj, "nos-version", "%s %s names no %s release (platform.version, e.g. %s); the release decides which features its configuration may use",
			kind, sw.Name, nos, d.Version)
	} else if pl.Version != "" {
		if _, err := platform.ParseVersion(nos, pl.Version); err != nil {
			v.ps.add(p+".platform.version", obj, "nos-version", "%s %s: platform.version %v", kind, sw.Name, err)
		}
	}
	if !m.Generic() && sw.PortCount != m.Ports() {
		v.ps.add(p+".portCount", obj, "port-count", "%s %s has portCount %d, but %s/%s has %d front-panel ports (omit portCount)",
			kind, sw.Name, sw.PortCount, m.Vendor, m.Name, m.Ports())
	}
	prefix := sw.PortPrefix
	if prefix == "" {
		prefix = DefaultPortPrefix
	}
	ports := platform.NewPorts(m, nos, prefix, sw.PortCount)
	for i, b := range sw.Breakouts {
		if err := ports.Breakout(b.Port, b.Into); err != nil {
			v.ps.add(fmt.Sprintf("%s.breakouts[%d]", p, i), obj, "breakout", "%s %s: %v", kind, sw.Name, err)
		}
	}
	return ports
}

func validPortPrefix(s string) bool {
	if len(s) > maxPortPrefixLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func (v *validator) server(s *fabricScope, p string, srv *domain.Server, missingRail map[[2]int]bool) {
	obj := "server " + srv.Name
	if _, ok := domain.LookupGPUModel(srv.GPUModel); !ok {
		v.ps.add(p+".gpuModel", obj, "gpu-model-known", "server %s has GPU model %q, which is not known; known models: %s",
			srv.Name, srv.GPUModel, strings.Join(domain.GPUModelNames(), ", "))
	}
	gpusOK := srv.GPUs >= 1 && srv.GPUs <= maxGPUsPerServer
	if !gpusOK {
		v.ps.add(p+".gpus", obj, "gpu-count", "server %s has %d GPUs; it must have 1..%d", srv.Name, srv.GPUs, maxGPUsPerServer)
	}
	if err := domain.ValidateServerResources(p, srv); err != nil {
		v.ps.add(err.Field, obj, "server-resources", "server %s: %s", srv.Name, err.Message)
	}
	if srv.Stripe < 0 {
		v.ps.add(p+".stripe", obj, "stripe-range", "server %s has stripe %d; stripes are numbered from 0", srv.Name, srv.Stripe)
	}
	if len(srv.GPUNUMA) > 0 && len(srv.GPUNUMA) != srv.GPUs {
		v.ps.add(p+".gpuNuma", obj, "gpu-numa", "server %s lists the NUMA node of %d GPUs but has %d GPUs", srv.Name, len(srv.GPUNUMA), srv.GPUs)
	}
	for i, n := range srv.GPUNUMA {
		if n < 0 || n > maxNUMA {
			v.ps.add(fmt.Sprintf("%s.gpuNuma[%d]", p, i), obj, "gpu-numa", "server %s puts GPU %d on NUMA node %d; nodes are 0..%d", srv.Name, i, n, maxNUMA)
		}
	}
	if d := srv.NVLinkDomain; d != "" && v.name(p+".nvlinkDomain", obj, "nvlinkDomain", d) {
		if first, ok := v.nvl[d]; !ok {
			v.nvl[d] = nvlDomain{fabric: s.ref, model: srv.GPUModel, server: srv.Name, path: p}
		} else if first.fabric != s.ref {
			v.ps.add(p+".nvlinkDomain", obj, "nvlink-domain", "server %s is in NVLink domain %q, which server %s of fabric %s is in; an NVLink domain does not span fabrics",
				srv.Name, d, first.server, first.fabric)
		} else if first.model != srv.GPUModel {
			v.ps.add(p+".nvlinkDomain", obj, "nvlink-domain", "server %s (%s) is in NVLink domain %q with server %s (%s); the GPUs of one NVLink domain are one model",
				srv.Name, srv.GPUModel, d, first.server, first.model)
		}
	}

	rail := s.f.RailOptimized
	names := map[string]string{}
	rdma := map[string]string{}
	rails := map[int]string{}
	for i := range srv.NICs {
		nic := &srv.NICs[i]
		np := fmt.Sprintf("%s.nics[%d]", p, i)
		nobj := "nic " + srv.Name + "/" + nic.Name
		if v.name(np+".name", nobj, "NIC name", nic.Name) {
			v.unique(names, nic.Name, np, np+".name", nobj, "NIC name on server "+srv.Name)
		}
		if nic.RDMADevice != "" {
			if other, ok := rdma[nic.RDMADevice]; ok {
				v.ps.add(np+".rdmaDevice", nobj, "rdma-device-duplicate", "NIC %s/%s uses RDMA device %q, which NIC %s already uses", srv.Name, nic.Name, nic.RDMADevice, other)
			} else {
				rdma[nic.RDMADevice] = nic.Name
			}
		}
		if nic.NUMA < 0 || nic.NUMA > maxNUMA {
			v.ps.add(np+".numa", nobj, "nic-numa", "NIC %s/%s is on NUMA node %d; nodes are 0..%d", srv.Name, nic.Name, nic.NUMA, maxNUMA)
		}
		if gpusOK && (nic.GPU < -1 || nic.GPU >= srv.GPUs) {
			v.ps.add(np+".gpu", nobj, "nic-gpu-index", "NIC %s/%s is next to GPU %d; the server has GPUs 0..%d (-1 for none)", srv.Name, nic.Name, nic.GPU, srv.GPUs-1)
		}
		if nic.Rail < 0 || (rail && gpusOK && nic.Rail >= srv.GPUs) {
			hi := maxGPUsPerServer - 1
			if rail && gpusOK {
				hi = srv.GPUs - 1
			}
			v.ps.add(np+".rail", nobj, "nic-rail-range", "NIC %s/%s is on rail %d; this server's rails are 0..%d", srv.Name, nic.Name, nic.Rail, hi)
		} else if rail {
			if other, ok := rails[nic.Rail]; ok {
				v.ps.add(np+".rail", nobj, "nic-rail-duplicate", "NIC %s/%s is on rail %d, like NIC %s; a rail-optimized server has one NIC per rail", srv.Name, nic.Name, nic.Rail, other)
			} else {
				rails[nic.Rail] = nic.Name
			}
		}
	}
	if !rail || !gpusOK {
		return
	}
	if len(srv.NICs) != srv.GPUs {
		v.ps.add(p+".nics", obj, "rail-nic-count", "server %s has %d GPUs and %d NICs; in rail-optimized fabric %s a server has one NIC per GPU rail (0..%d)",
			srv.Name, srv.GPUs, len(srv.NICs), s.ref, srv.GPUs-1)
	}
	have, ok := s.stripeRails[srv.Stripe]
	if !ok {
		v.ps.add(p+".stripe", obj, "stripe-exists", "server %s is in stripe %d, which has no leaves in fabric %s", srv.Name, srv.Stripe, s.ref)
		return
	}
	for r := 0; r < srv.GPUs; r++ {
		k := [2]int{srv.Stripe, r}
		if !have[r] && !missingRail[k] {
			missingRail[k] = true
			v.ps.add(s.path+".leaves", fmt.Sprintf("stripe %d rail %d", srv.Stripe, r), "stripe-rail-leaf",
				"stripe %d has no leaf for rail %d, which server %s (%d GPUs, rails 0..%d) needs", srv.Stripe, r, srv.Name, srv.GPUs, srv.GPUs-1)
		}
	}
}

func (v *validator) cable(s *fabricScope, p string, c *domain.Cable) {
	obj := cableRef(c)
	srv := v.lookupServer(s, p+".server", obj, c.Server)
	var nic *domain.NIC
	if srv != nil {
		if c.NIC == "" {
			v.ps.add(p+".nic", obj, "required", "%s names no NIC", obj)
		} else if nic = findNIC(srv, c.NIC); nic == nil {
			v.ps.add(p+".nic", obj, "port-exists", "server %s has no NIC %q (its NICs: %s)", srv.Name, c.NIC, nicNames(srv))
		}
	}
	leaf := v.lookupSwitch(s, p+".leaf", obj, "leaf", c.Leaf)
	portOK := leaf != nil && v.port(s, p+".port", obj, "leaf", leaf, c.Port)
	if portOK {
		k := leaf.Name + "\x00" + c.Port
		if other, used := s.ports[k]; used {
			v.ps.add(p+".port", obj, "port-cabled-once", "leaf port %s/%s is already used by %s", leaf.Name, c.Port, other)
		} else {
			s.ports[k] = obj
		}
	}
	if nic != nil {
		k := nicKey{srv.Name, nic.Name}
		if other, used := s.nics[k]; used {
			v.ps.add(p+".nic", obj, "nic-cabled-once", "NIC %s/%s is already cabled by %s", srv.Name, nic.Name, other)
		} else {
			s.nics[k] = obj
		}
	}
	if leaf != nil && srv != nil && leaf.Stripe != nil && *leaf.Stripe != srv.Stripe {
		v.ps.add(p+".leaf", obj, "stripe-match", "server %s is in stripe %d but leaf %s serves stripe %d", srv.Name, srv.Stripe, leaf.Name, *leaf.Stripe)
	}
	if s.f.RailOptimized && leaf != nil && nic != nil && leaf.Rail != nil && *leaf.Rail != nic.Rail {
		v.ps.add(p+".leaf", obj, "rail-match", "NIC %s/%s is on rail %d but leaf %s serves rail %d", srv.Name, nic.Name, nic.Rail, leaf.Name, *leaf.Rail)
	}
	v.link(p+".ipv4", obj, c.IPv4, false)
	v.link(p+".ipv6", obj, c.IPv6, true)
}

func (v *validator) uplink(s *fabricScope, p string, u *domain.Uplink) {
	obj := fmt.Sprintf("uplink %s/%s -> %s/%s", u.Leaf, u.LeafPort, u.Spine, u.SpinePort)
	leaf, spine := s.leaves[u.Leaf], s.spines[u.Spine]
	if leaf != nil && spine != nil && leaf.Pod != nil && spine.Pod != nil && *leaf.Pod != *spine.Pod {
		v.ps.add(p+".spine", obj, "pod-match", "leaf %s is in pod %d but spine %s is in pod %d; a leaf connects to the spines of its own pod", leaf.Name, *leaf.Pod, spine.Name, *spine.Pod)
	}
	if leaf := v.lookupSwitch(s, p+".leaf", obj, "leaf", u.Leaf); leaf != nil && v.port(s, p+".leafPort", obj, "leaf", leaf, u.LeafPort) {
		k := leaf.Name + "\x00" + u.LeafPort
		if other, used := s.ports[k]; used {
			v.ps.add(p+".leafPort", obj, "port-cabled-once", "leaf port %s/%s is already used by %s", leaf.Name, u.LeafPort, other)
		} else {
			s.ports[k] = obj
		}
	}
	if spine := v.lookupSwitch(s, p+".spine", obj, "spine", u.Spine); spine != nil && v.port(s, p+".spinePort", obj, "spine", spine, u.SpinePort) {
		k := spine.Name + "\x00" + u.SpinePort
		if other, used := s.ports[k]; used {
			v.ps.add(p+".spinePort", obj, "port-cabled-once", "spine port %s/%s is already used by %s", spine.Name, u.SpinePort, other)
		} else {
			s.ports[k] = obj
		}
	}
	v.link(p+".ipv4", obj, u.IPv4, false)
}

func (v *validator) spineUplink(s *fabricScope, p string, u *domain.SpineUplink) {
	obj := fmt.Sprintf("spine uplink %s/%s -> %s/%s", u.Spine, u.SpinePort, u.SuperSpine, u.SuperSpinePort)
	for _, end := range []struct{ field, kind, sw, port string }{
		{"spine", "spine", u.Spine, u.SpinePort},
		{"superSpine", "super-spine", u.SuperSpine, u.SuperSpinePort},
	} {
		sw := v.lookupSwitch(s, p+"."+end.field, obj, end.kind, end.sw)
		if sw == nil || !v.port(s, p+"."+end.field+"Port", obj, end.kind, sw, end.port) {
			continue
		}
		k := sw.Name + "\x00" + end.port
		if other, used := s.ports[k]; used {
			v.ps.add(p+"."+end.field+"Port", obj, "port-cabled-once", "%s port %s/%s is already used by %s", end.kind, sw.Name, end.port, other)
		} else {
			s.ports[k] = obj
		}
	}
	v.link(p+".ipv4", obj, u.IPv4, false)
}

func (v *validator) lookupServer(s *fabricScope, field, obj, name string) *domain.Server {
	if name == "" {
		v.ps.add(field, obj, "required", "%s names no server", obj)
		return nil
	}
	if srv, ok := s.servers[name]; ok {
		return srv
	}
	v.ps.add(field, obj, "device-exists", "%s", v.whereIs("server", name, s.ref))
	return nil
}

func (v *validator) lookupSwitch(s *fabricScope, field, obj, kind, name string) *domain.Switch {
	if name == "" {
		v.ps.add(field, obj, "required", "%s names no %s", obj, kind)
		return nil
	}
	m := s.leaves
	switch kind {
	case "spine":
		m = s.spines
	case "super-spine":
		m = s.supers
	}
	if sw, ok := m[name]; ok {
		return sw
	}
	v.ps.add(field, obj, "device-exists", "%s", v.whereIs(kind, name, s.ref))
	return nil
}

// whereIs explains a failed lookup: a misspelling, a device of another kind,
// or a device of another fabric call for different fixes.
func (v *validator) whereIs(kind, name, fabric string) string {
	d, ok := v.devices[name]
	switch {
	case !ok:
		return fmt.Sprintf("there is no %s named %q in fabric %s", kind, name, fabric)
	case d.kind != kind:
		return fmt.Sprintf("%q is a %s (%s), not a %s", name, d.kind, d.path, kind)
	default:
		return fmt.Sprintf("%s %q is in fabric %s (%s), not in fabric %s", kind, name, d.fabric, d.path, fabric)
	}
}

// features refuses a switch whose NOS release lacks what the topology
// alone says its configuration will use: EVPN type-5 on every leaf (each
// carries tenant VRFs) and BGP unnumbered where an uplink has no address.
// What depends on tenants (anycast gateways, group policy) is checked when
// the configuration is rendered.
func (v *validator) features(s *fabricScope, p, kind string, sw *domain.Switch, unnumbered bool) {
	ports := s.portSpace[sw.Name]
	if ports == nil || sw.Platform == nil || sw.Platform.Version == "" {
		return
	}
	if _, err := platform.ParseVersion(ports.NOS(), sw.Platform.Version); err != nil {
		return // reported as nos-version
	}
	var need []platform.Feature
	if kind == "leaf" {
		need = append(need, platform.EVPNType5)
	}
	if unnumbered {
		need = append(need, platform.BGPUnnumbered)
	}
	if err := platform.Check(sw.Name, ports.Model(), ports.NOS(), sw.Platform.Version, need); err != nil {
		v.ps.add(p+".platform.version", kind+" "+sw.Name, "nos-feature", "%v", err)
	}
}

// port checks that a switch has the named port, spelled as its platform
// spells it (each port has one spelling, so "swp01" or "Ethernet1/01"
// cannot dodge the port-cabled-once rule).
func (v *validator) port(s *fabricScope, field, obj, kind string, sw *domain.Switch, port string) bool {
	if port == "" {
		v.ps.add(field, obj, "required", "%s names no %s port", obj, kind)
		return false
	}
	ports := s.portSpace[sw.Name]
	if ports == nil {
		return false // the platform is reported
	}
	if _, err := ports.Parse(port); err != nil {
		m := ports.Model()
		v.ps.add(field, obj, "port-exists", "%s %s has %v [%s on %s/%s]", kind, sw.Name, err, ports.NOS(), m.Vendor, m.Name)
		return false
	}
	return true
}

func (v *validator) link(field, obj, value string, v6 bool) {
	if value == "" {
		return
	}
	p, err := parseLink(value, v6)
	if err != nil {
		bits := linkBits4
		if v6 {
			bits = linkBits6
		}
		v.ps.add(field, obj, "link-address", "%s address %q must be a /%d link prefix but is %v", obj, value, bits, err)
		return
	}
	v.addrs = append(v.addrs, addrUse{p: p, field: field, object: obj})
}

// overlaps sweeps every link prefix and loopback in address order. Prefixes
// either nest or are disjoint, so an address overlaps an earlier one exactly
// when the earlier prefix reaching furthest contains it.
func (v *validator) overlaps() {
	a := v.addrs
	sort.SliceStable(a, func(i, j int) bool {
		if c := a[i].p.Addr().Compare(a[j].p.Addr()); c != 0 {
			return c < 0
		}
		return a[i].p.Bits() < a[j].p.Bits()
	})
	var cover *addrUse
	var coverEnd netip.Addr
	for i := range a {
		u := &a[i]
		if cover != nil && cover.p.Contains(u.p.Addr()) {
			rule, at, other := "link-address-overlap", u, cover
			switch {
			case cover.loopback && u.loopback:
				rule = "loopback"
			case u.loopback:
				// Point at the link: a loopback is one address, the link
				// is usually the one to renumber.
				at, other = cover, u
			}
			v.ps.add(at.field, at.object, rule, "%s %s overlaps %s %s (%s)", at.object, describeUse(at), other.object, describeUse(other), other.field)
		}
		if end := lastAddr(u.p); cover == nil || end.BitLen() != coverEnd.BitLen() || end.Compare(coverEnd) > 0 {
			cover, coverEnd = u, end
		}
	}
}

func describeUse(u *addrUse) string {
	if u.loopback {
		return "loopback " + u.p.Addr().String()
	}
	if u.p.Addr().Is4() {
		return "ipv4 " + u.p.String()
	}
	return "ipv6 " + u.p.String()
}

func findNIC(srv *domain.Server, name string) *domain.NIC {
	for i := range srv.NICs {
		if srv.NICs[i].Name == name {
			return &srv.NICs[i]
		}
	}
	return nil
}

func nicNames(srv *domain.Server) string {
	if len(srv.NICs) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, n := range srv.NICs {
		if i == 8 {
			fmt.Fprintf(&b, ", ... (%d in all)", len(srv.NICs))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n.Name)
	}
	return b.String()
}
