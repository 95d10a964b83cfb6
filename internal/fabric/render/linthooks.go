package render

import (
	"cmp"
	"fmt"
	"regexp"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/lint"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
)

// frontPanel matches the names of front-panel ports (and their
// sub-interfaces or units) as each NOS writes them; loopbacks, SVIs, VTEP
// and IRB interfaces are logical and not the platform's to check.
var frontPanel = map[string]*regexp.Regexp{
	EOS:   regexp.MustCompile(`^(Ethernet[0-9/]+)(\.[0-9]+)?$`),
	NXOS:  regexp.MustCompile(`^(Ethernet[0-9/]+)(\.[0-9]+)?$`),
	SONiC: regexp.MustCompile(`^(Ethernet[0-9]+)(\.[0-9]+)?$`),
	Junos: regexp.MustCompile(`^((?:et|xe|ge)-[0-9]+/[0-9]+/[0-9]+(?::[0-9]+)?)(\.[0-9]+)?$`),
}

// lintFeatures maps what the lint finds a configuration using to the
// platform feature table; optional is a feature the renderer uses only
// where the table lists it (platform.Has), the rest must pass
// platform.Check.
var lintFeatures = map[string]struct {
	f        platform.Feature
	optional bool
}{
	lint.FeatureJunosGBP:           {platform.VXLANGBP, true},
	lint.FeatureNXOSSecurityGroups: {platform.GroupPolicy, false},
	lint.FeatureNXOSEVPN:           {platform.EVPNType5, false},
	lint.FeatureEOSEVPN:            {platform.EVPNType5, false},
	lint.FeatureEOSRFC5549:         {platform.BGPUnnumbered, false},
}

// SwitchLintHooks are the platform rules of internal/fabric/lint for one
// switch of the inventory: every front-panel interface a configuration
// names must be a port of the switch's model (with its breakouts), and
// every feature it uses must be in the switch's release. The deploy path
// lints each device with them before applying anything.
func SwitchLintHooks(sw domain.Switch) lint.Hooks {
	d := &fabric.Device{Name: sw.Name, NOS: sw.NOS, Platform: sw.Platform, Breakouts: sw.Breakouts, PortPrefix: sw.PortPrefix, PortCount: sw.PortCount}
	ports := devicePorts(d)
	version := ""
	if sw.Platform != nil {
		version = sw.Platform.Version
	}
	model := ports.Model()
	re := frontPanel[ports.NOS()]
	if ports.NOS() == FRR {
		re = regexp.MustCompile(`^(` + regexp.QuoteMeta(cmp.Or(sw.PortPrefix, platform.DefaultPortPrefix)) + `[0-9]+(?:s[0-9]+)?)(\.[0-9]+)?$`)
	}
	return lint.Hooks{
		InterfaceName: func(device, name string) error {
			if re == nil {
				return nil
			}
			m := re.FindStringSubmatch(name)
			if m == nil {
				return nil // logical: loopback, SVI, VTEP, IRB
			}
			_, err := ports.Parse(m[1])
			return err
		},
		Feature: func(device, f string) error {
			lf, ok := lintFeatures[f]
			switch {
			case f == lint.FeatureJunosOverlayECMP:
				if !model.OverlayECMP {
					return fmt.Errorf("%s/%s does not take forwarding-options vxlan-routing overlay-ecmp (only models that need it: see docs/fabric.md)", model.Vendor, model.Name)
				}
				return nil
			case !ok:
				return nil
			case lf.optional:
				if !platform.Has(model, ports.NOS(), version, lf.f) {
					return fmt.Errorf("%s/%s at release %q lacks %s (see the feature table in docs/fabric.md)", model.Vendor, model.Name, version, lf.f)
				}
				return nil
			}
			return platform.Check(sw.Name, model, ports.NOS(), version, []platform.Feature{lf.f})
		},
	}
}

// LintHooks are SwitchLintHooks for every switch of a topology, chosen by
// device name; a device the topology lacks gets no platform rules.
func LintHooks(t *domain.Topology) lint.Hooks {
	bySwitch := map[string]lint.Hooks{}
	if t != nil {
		for _, site := range t.Sites {
			for _, fab := range site.Fabrics {
				for _, sws := range [][]domain.Switch{fab.Leaves, fab.Spines, fab.SuperSpines} {
					for _, sw := range sws {
						bySwitch[sw.Name] = SwitchLintHooks(sw)
					}
				}
			}
		}
	}
	return lint.Hooks{
		InterfaceName: func(device, name string) error {
			if h, ok := bySwitch[device]; ok {
				return h.InterfaceName(device, name)
			}
			return nil
		},
		Feature: func(device, f string) error {
			if h, ok := bySwitch[device]; ok {
				return h.Feature(device, f)
			}
			return nil
		},
	}
}
