package render

import (
	"cmp"
	"errors"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
)

// forPlatform prepares d for rendering as nos: it checks that the release
// the switch runs has every feature the configuration will use, and when
// nos does not name ports as the device's names are written (fabric
// render --nos, or a platform-less device compiled as another NOS) it
// renames the ports to what nos calls the same front-panel ports, on the device's
// model if it runs nos, else on nos's default model. The renderers then
// print names as they find them. d is not changed; the copy shares what
// it does not rename.
func forPlatform(d *fabric.Device, nos string) (*fabric.Device, target, error) {
	src := devicePorts(d)
	dst := src
	version := ""
	if d.Platform != nil {
		version = d.Platform.Version
	}
	// The names are src's NOS's: a generic (Linux) device is named as FRR
	// names ports even when compiled with another default NOS.
	if nos != src.NOS() {
		m := src.Model()
		def, _ := platform.DefaultFor(nos)
		if !m.Runs(nos) {
			m, _ = platform.Lookup(def.Vendor, def.Model)
		}
		version = def.Version // the device's release is of another NOS
		dst = platform.NewPorts(m, nos, cmp.Or(d.PortPrefix, platform.DefaultPortPrefix), d.PortCount)
	}
	tgt := target{model: dst.Model(), nos: nos, version: version}
	if err := platform.Check(d.Name, dst.Model(), nos, version, features(d)); err != nil {
		field := "platform.version"
		var fe *platform.FeatureError
		if errors.As(err, &fe) && fe.Min == "" {
			field = "platform.model"
		}
		return nil, tgt, &domain.Error{Code: domain.CodeInvalidArgument, Field: field, Message: err.Error(),
			Details: []domain.Detail{{Field: field, Object: "switch " + d.Name, Rule: "nos-feature", Message: err.Error()}}}
	}
	if dst == src {
		return d, tgt, nil
	}
	out, err := renamePorts(d, src, dst)
	return out, tgt, err
}

// target is the switch a device is rendered for: the model whose port
// names it gets and the release it runs.
type target struct {
	model   platform.Model
	nos     string
	version string
}

// caps are what the target's model and release add to a configuration:
// Junos GBP where the feature table lists the model at that release,
// overlay-ecmp and the GBP profile where the model needs them.
func (t target) caps() Caps {
	if t.nos != Junos {
		return Caps{}
	}
	gbp := platform.Has(t.model, t.nos, t.version, platform.VXLANGBP)
	return Caps{OverlayECMP: t.model.OverlayECMP, GBP: gbp, GBPProfile: gbp && t.model.GBPProfile}
}

// devicePorts is the port space the device's names are in.
func devicePorts(d *fabric.Device) *platform.Ports {
	m, _ := platform.Lookup(platform.GenericVendor, platform.GenericModel)
	nos := d.NOS
	if d.Platform != nil {
		if pm, ok := platform.Lookup(d.Platform.Vendor, d.Platform.Model); ok {
			m = pm
		}
	}
	if m.Generic() {
		nos = platform.FRR
	}
	p := platform.NewPorts(m, nos, cmp.Or(d.PortPrefix, platform.DefaultPortPrefix), d.PortCount)
	for _, b := range d.Breakouts {
		_ = p.Breakout(b.Port, b.Into) // validated with the topology
	}
	return p
}

// features lists what d's configuration relies on that a release may lack.
func features(d *fabric.Device) []platform.Feature {
	var out []platform.Feature
	if d.Role == fabric.RoleLeaf && len(d.VRFs) > 0 {
		out = append(out, platform.EVPNType5)
	}
	if hasVLANAware(d) {
		out = append(out, platform.AnycastGateway)
	}
	if slices.ContainsFunc(d.Uplinks, fabric.Uplink.Unnumbered) {
		out = append(out, platform.BGPUnnumbered)
	}
	if hasSegmented(d) {
		out = append(out, platform.GroupPolicy)
	}
	return out
}

// renamePorts copies d with every port name translated from src to dst:
// server ports, uplinks, link sessions and policy group members.
func renamePorts(d *fabric.Device, src, dst *platform.Ports) (*fabric.Device, error) {
	names := map[string]string{}
	name := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		if n, ok := names[p]; ok {
			return n, nil
		}
		n, err := src.Translate(p, dst)
		if err != nil {
			return "", domain.Invalid("nos", "device %s: cannot name port %s as %s does on %s/%s: %v",
				d.Name, p, dst.NOS(), dst.Model().Vendor, dst.Model().Name, err)
		}
		names[p] = n
		return n, nil
	}
	// Split the same ports on dst first, so a declared breakout carries
	// over even where no cable uses it yet.
	for _, n := range src.BrokenOut() {
		if dst.Split(n) == 0 {
			if err := dst.Breakout(dst.Name(platform.Port{N: n}), src.Split(n)); err != nil {
				return nil, domain.Invalid("nos", "device %s: port %s: %v", d.Name, src.Name(platform.Port{N: n}), err)
			}
		}
	}
	out := *d
	var err error
	rename := func(s *string) {
		if err == nil {
			*s, err = name(*s)
		}
	}
	out.Ports = slices.Clone(d.Ports)
	for i := range out.Ports {
		rename(&out.Ports[i].Name)
	}
	out.Uplinks = slices.Clone(d.Uplinks)
	for i := range out.Uplinks {
		u := &out.Uplinks[i]
		rename(&u.Port)
		// The peer's platform is not in the intent; `fabric render --nos`
		// renders every switch as one NOS, so a peer port named like ours
		// is renamed like ours (descriptions only).
		peer := platform.NewPorts(src.Model(), src.NOS(), cmp.Or(d.PortPrefix, platform.DefaultPortPrefix), 0)
		if n, err := peer.Translate(u.PeerPort, platform.NewPorts(dst.Model(), dst.NOS(), "", 0)); err == nil {
			u.PeerPort = n
		}
	}
	out.Sessions = slices.Clone(d.Sessions)
	for i := range out.Sessions {
		rename(&out.Sessions[i].Interface)
	}
	out.VRFs = slices.Clone(d.VRFs)
	for i := range out.VRFs {
		v := &out.VRFs[i]
		if v.Policy == nil {
			continue
		}
		pol := *v.Policy
		pol.Groups = slices.Clone(pol.Groups)
		for j := range pol.Groups {
			g := &pol.Groups[j]
			g.Ports = slices.Clone(g.Ports)
			for k := range g.Ports {
				rename(&g.Ports[k])
			}
		}
		v.Policy = &pol
	}
	if err != nil {
		return nil, err
	}
	out.Platform = &domain.Platform{Vendor: dst.Model().Vendor, Model: dst.Model().Name}
	out.NOS = dst.NOS()
	out.Breakouts = nil
	for _, n := range dst.BrokenOut() {
		out.Breakouts = append(out.Breakouts, domain.Breakout{Port: dst.Name(platform.Port{N: n}), Into: dst.Split(n)})
	}
	// Ports are in port order, which the new names may not sort the same.
	slices.SortStableFunc(out.Ports, func(a, b fabric.Port) int { return fabric.ComparePorts(a.Name, b.Name) })
	slices.SortStableFunc(out.Uplinks, func(a, b fabric.Uplink) int { return fabric.ComparePorts(a.Port, b.Port) })
	return &out, nil
}
