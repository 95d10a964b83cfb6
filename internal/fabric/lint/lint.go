package lint

import (
	"fmt"
	"slices"
	"strings"
)

// File is one configuration file of a device.
type File struct {
	Name    string
	Content string
}

// Config is one device's rendered configuration.
type Config struct {
	Device string
	NOS    string // junos, nxos, eos, sonic, frr
	Files  []File
}

// Finding is one broken rule.
type Finding struct {
	Device string `json:"device"`
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"` // 1-based; 0 when the rule is about the whole file
	Rule   string `json:"rule"`
	Msg    string `json:"msg"`
}

func (f Finding) String() string {
	at := f.File
	if f.Line > 0 {
		at = fmt.Sprintf("%s:%d", f.File, f.Line)
	}
	return fmt.Sprintf("%s %s: %s: %s", f.Device, at, f.Rule, f.Msg)
}

// Hooks are the rules that need the switch's platform: its model and
// release. The platform inventory provides them; a nil hook is a rule not
// checked.
type Hooks struct {
	// InterfaceName returns an error when name is not an interface name
	// of the device's platform.
	InterfaceName func(device, name string) error
	// Feature returns an error when the device's platform or release does
	// not support a feature the configuration uses (see Feature* names).
	Feature func(device, feature string) error
}

// Features a configuration can use, as the Feature hook is asked about them.
const (
	FeatureJunosMACVRF        = "junos/mac-vrf"
	FeatureJunosOverlayECMP   = "junos/overlay-ecmp"
	FeatureJunosGBP           = "junos/gbp"
	FeatureNXOSSecurityGroups = "nxos/security-groups"
	FeatureNXOSEVPN           = "nxos/evpn"
	FeatureEOSEVPN            = "eos/evpn"
	FeatureEOSRFC5549         = "eos/rfc5549"
)

// Check lints every device and then the fabric as a whole (route targets
// across devices). Findings are in device order, then line order.
func Check(cs []Config, h Hooks) []Finding {
	var out []Finding
	owners := map[string]map[instance][]string{} // RT -> instance -> devices
	for _, c := range cs {
		fs, insts := device(c, h)
		out = append(out, fs...)
		for _, in := range insts {
			if owners[in.rt] == nil {
				owners[in.rt] = map[instance][]string{}
			}
			if at := c.Device + " " + in.file; !slices.Contains(owners[in.rt][in.instance], at) {
				owners[in.rt][in.instance] = append(owners[in.rt][in.instance], at)
			}
		}
	}
	// One route target, one EVPN instance, fabric-wide: a tenant's VRF
	// has the same target on every leaf, but two VRFs (or two L2 EVIs)
	// sharing one import each other's routes.
	for _, rt := range slices.Sorted(mapsKeys(owners)) {
		byInst := owners[rt]
		if len(byInst) < 2 {
			continue
		}
		insts := slices.SortedFunc(mapsKeys(byInst), func(a, b instance) int { return strings.Compare(a.String(), b.String()) })
		var names []string
		for _, in := range insts {
			names = append(names, fmt.Sprintf("%s (on %s)", in, strings.Join(byInst[in], ", ")))
		}
		first := byInst[insts[0]][0]
		dev, file, _ := strings.Cut(first, " ")
		out = append(out, Finding{Device: dev, File: file, Rule: "evpn/route-target-unique",
			Msg: fmt.Sprintf("route target %s is shared by %s: each imports the others' routes (RFC 7432 section 7.10: a route target selects the EVPN instances that import a route)", rt, strings.Join(names, " and "))})
	}
	return out
}

// Device lints one device on its own.
func Device(c Config, h Hooks) []Finding {
	fs, _ := device(c, h)
	return fs
}

func device(c Config, h Hooks) ([]Finding, []rtUse) {
	var out []Finding
	var rts []rtUse
	for _, f := range c.Files {
		var r *report
		switch {
		case c.NOS == "junos" && strings.HasSuffix(f.Name, ".set"):
			r = junos(c.Device, f)
		case c.NOS == "nxos" && strings.HasSuffix(f.Name, ".cfg"):
			r = nxos(c.Device, f)
		case c.NOS == "eos" && strings.HasSuffix(f.Name, ".cfg"):
			r = eos(c.Device, f)
		case (c.NOS == "frr" || c.NOS == "sonic") && f.Name == "frr.conf":
			r = frr(c.Device, f)
		case c.NOS == "sonic" && f.Name == "config_db.json":
			r = sonic(c.Device, f)
		default:
			continue // nftables: checked by nft
		}
		r.hooks(h)
		out = append(out, r.findings...)
		rts = append(rts, r.rts...)
		// Within one file a target owned by two instances is a finding
		// even when Check is not given the whole fabric.
		seen := map[string]instance{}
		for _, u := range r.rts {
			if o, ok := seen[u.rt]; ok && o != u.instance {
				out = append(out, Finding{Device: c.Device, File: f.Name, Line: u.line, Rule: "evpn/route-target-unique",
					Msg: fmt.Sprintf("route target %s of %s is also the target of %s on this device (RFC 7432 section 7.10)", u.rt, u.instance, o)})
				continue
			}
			seen[u.rt] = u.instance
		}
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		return a.Line - b.Line
	})
	return out, rts
}

// instance is an EVPN instance a route target belongs to: kind (vrf,
// mac-vrf, l2vni) and name.
type instance struct{ kind, name string }

func (i instance) String() string { return i.kind + " " + i.name }

type rtUse struct {
	instance
	rt   string
	file string
	line int
}

// report collects one file's findings, route targets and what the hooks
// must be asked.
type report struct {
	device, file string
	findings     []Finding
	rts          []rtUse
	ifaces       map[string]int // interface name -> first line
	features     map[string]int // feature -> first line
}

func newReport(device, file string) *report {
	return &report{device: device, file: file, ifaces: map[string]int{}, features: map[string]int{}}
}

func (r *report) add(line int, rule, format string, args ...any) {
	r.findings = append(r.findings, Finding{Device: r.device, File: r.file, Line: line, Rule: rule, Msg: fmt.Sprintf(format, args...)})
}

func (r *report) rt(line int, kind, name, rt string) {
	r.rts = append(r.rts, rtUse{instance: instance{kind, name}, rt: rt, file: r.file, line: line})
}

func (r *report) iface(line int, name string) {
	if _, ok := r.ifaces[name]; !ok {
		r.ifaces[name] = line
	}
}

func (r *report) feature(line int, f string) {
	if _, ok := r.features[f]; !ok {
		r.features[f] = line
	}
}

func (r *report) hooks(h Hooks) {
	if h.InterfaceName != nil {
		for _, n := range slices.Sorted(mapsKeys(r.ifaces)) {
			if err := h.InterfaceName(r.device, n); err != nil {
				r.add(r.ifaces[n], "platform/interface-name", "interface %s: %v", n, err)
			}
		}
	}
	if h.Feature != nil {
		for _, f := range slices.Sorted(mapsKeys(r.features)) {
			if err := h.Feature(r.device, f); err != nil {
				r.add(r.features[f], "platform/min-version", "%s: %v", f, err)
			}
		}
	}
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// line is one line of an indented configuration (NX-OS, EOS, FRR) with
// the lines it is nested under.
type line struct {
	n       int
	indent  int
	text    string
	parents []string // outermost first
}

// top returns the outermost enclosing line ("" at top level).
func (l line) top() string {
	if len(l.parents) == 0 {
		return ""
	}
	return l.parents[0]
}

// in reports whether some enclosing line starts with prefix.
func (l line) in(prefix string) (string, bool) {
	for i := len(l.parents) - 1; i >= 0; i-- {
		if strings.HasPrefix(l.parents[i], prefix) {
			return l.parents[i], true
		}
	}
	return "", false
}

// indented splits an indented configuration into lines, skipping blank
// lines and comments (comment prefixes: "!" and "#"; a lone "!" also ends
// nothing: nesting is by indentation, as the switches print it).
func indented(content string) []line {
	out := make([]line, 0, strings.Count(content, "\n")+1)
	var indents []int
	var texts []string // the open lines, outermost first
	n := 0
	for raw := range strings.SplitSeq(content, "\n") {
		n++
		t := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimLeft(t, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "!") || strings.HasPrefix(trimmed, "#") {
			continue
		}
		ind := len(t) - len(trimmed)
		popped := false
		for len(indents) > 0 && indents[len(indents)-1] >= ind {
			indents, texts = indents[:len(indents)-1], texts[:len(texts)-1]
			popped = true
		}
		if popped {
			// Earlier lines' parents share texts' array: a push after a
			// pop must not overwrite them.
			texts = slices.Clone(texts)
		}
		out = append(out, line{n: n, indent: ind, text: trimmed, parents: texts[:len(texts):len(texts)]})
		indents, texts = append(indents, ind), append(texts, trimmed)
	}
	return out
}

// word returns the i-th word of s ("" past the end).
func word(s string, i int) string { return wordOf(strings.Fields(s), i) }

// after returns the word following key in s ("" when key is absent).
func after(s, key string) string { return afterOf(strings.Fields(s), key) }

// words splits a line into words on first use: most lines (ACL entries)
// are matched by prefix alone and never split.
type words struct {
	s    string
	f    []string
	done bool
}

func (w *words) fields() []string {
	if !w.done {
		w.f, w.done = strings.Fields(w.s), true
	}
	return w.f
}

func (w *words) at(i int) string         { return wordOf(w.fields(), i) }
func (w *words) after(key string) string { return afterOf(w.fields(), key) }
func (w *words) len() int                { return len(w.fields()) }

func wordOf(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

func afterOf(f []string, key string) string {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == key {
			return f[i+1]
		}
	}
	return ""
}
