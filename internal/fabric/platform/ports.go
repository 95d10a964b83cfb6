package platform

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Port is a front-panel port or one of its breakout sub-ports.
type Port struct {
	N   int // front-panel port, from 1
	Sub int // 1..n on a port broken out into n; 0 for the whole port
}

// Ports is the port space of one switch: its model's front panel, named as
// its NOS names ports, with the switch's breakouts applied. Build it with
// NewPorts, declare breakouts with Breakout, then Parse and Name.
type Ports struct {
	model Model
	nos   string
	split map[int]int // port -> sub-port count
	// prefix and count are the generic model's ports: prefix1..prefixN.
	prefix string
	count  int
}

// NewPorts returns the port space of a switch of model m running nos. On
// the generic model the ports are prefix1..prefix<count> (count 0: no
// limit); other models ignore prefix and count.
func NewPorts(m Model, nos, prefix string, count int) *Ports {
	return &Ports{model: m, nos: nos, split: map[int]int{}, prefix: prefix, count: count}
}

// Model returns the switch's model.
func (p *Ports) Model() Model { return p.model }

// NOS returns the NOS whose names the port space uses.
func (p *Ports) NOS() string { return p.nos }

// unbounded is the port count of a generic switch that states none.
const unbounded = 1 << 20

func (p *Ports) ports() int {
	if p.model.Generic() {
		if p.count <= 0 {
			return unbounded
		}
		return p.count
	}
	return p.model.Ports()
}

// Breakout splits the whole port named parent into `into` sub-ports. It
// fails when parent is not a whole port of the switch, is already broken
// out, or cannot be split that way.
func (p *Ports) Breakout(parent string, into int) error {
	pt, err := p.Parse(parent)
	if err != nil {
		return err
	}
	if pt.Sub != 0 {
		return fmt.Errorf("%s is a sub-port; name the whole port %s", parent, p.Name(Port{N: pt.N}))
	}
	if n := p.split[pt.N]; n != 0 {
		return fmt.Errorf("port %s is already broken out into %d", parent, n)
	}
	modes := p.model.Breakouts(pt.N)
	if !slices.Contains(modes, into) {
		if len(modes) == 0 {
			return fmt.Errorf("port %s of %s/%s cannot be broken out", parent, p.model.Vendor, p.model.Name)
		}
		return fmt.Errorf("port %s of %s/%s breaks out into %s, not %d", parent, p.model.Vendor, p.model.Name, joinInts(modes), into)
	}
	p.split[pt.N] = into
	return nil
}

// Split returns how many sub-ports front-panel port n is broken out into
// (0: not broken out).
func (p *Ports) Split(n int) int { return p.split[n] }

// BrokenOut lists the broken-out front-panel ports, in port order.
func (p *Ports) BrokenOut() []int {
	out := make([]int, 0, len(p.split))
	for n := range p.split {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Name returns the NOS's name of a port of the switch.
func (p *Ports) Name(pt Port) string {
	n, sub := pt.N, pt.Sub
	if p.model.Generic() {
		if sub > 0 {
			return p.prefix + strconv.Itoa(n) + "s" + strconv.Itoa(sub-1) // Cumulus: swp1s0
		}
		return p.prefix + strconv.Itoa(n)
	}
	g := p.model.group(n)
	if g == nil {
		return fmt.Sprintf("port%d", n) // not a port of the model; callers check first
	}
	split := p.split[n]
	switch p.nos {
	case EOS:
		// EOS names a multi-lane port by its first lane: Ethernet1/1 whole,
		// Ethernet1/1, 1/3, 1/5, 1/7 as 4 x 2 lanes; single-lane ports have
		// no lane part.
		if g.Lanes == 1 {
			return "Ethernet" + strconv.Itoa(n)
		}
		lane := 1
		if sub > 0 {
			lane = 1 + (sub-1)*g.Lanes/split
		}
		return fmt.Sprintf("Ethernet%d/%d", n, lane)
	case NXOS:
		if sub > 0 {
			return fmt.Sprintf("Ethernet1/%d/%d", n, sub) // breakout: module/port/sub-port
		}
		return fmt.Sprintf("Ethernet1/%d", n)
	case Junos:
		speed := g.Speed
		if sub > 0 {
			speed /= split
		}
		name := fmt.Sprintf("%s-0/0/%d", junosPrefix(speed), n-1) // FPC 0, PIC 0, ports from 0
		if sub > 0 {
			name += ":" + strconv.Itoa(sub-1) // channels from 0
		}
		return name
	case SONiC:
		// SONiC names a port by its first lane's index in the port map
		// (port_config.ini / platform.json): lanes are counted over the
		// whole front panel.
		idx := p.laneBase(n)
		if sub > 0 {
			idx += (sub - 1) * g.Lanes / split
		}
		return "Ethernet" + strconv.Itoa(idx)
	}
	return p.prefix + strconv.Itoa(n)
}

// junosPrefix is the Junos interface type of a port speed: xe- for 10G,
// et- for 25G and faster.
func junosPrefix(gbps int) string {
	switch {
	case gbps <= 1:
		return "ge"
	case gbps <= 10:
		return "xe"
	}
	return "et"
}

// laneBase is the index of the first lane of front-panel port n.
func (p *Ports) laneBase(n int) int {
	base := 0
	for _, g := range p.model.Groups {
		if n <= g.First {
			break
		}
		base += (min(n, g.Last+1) - g.First) * g.Lanes
	}
	return base
}

// ErrNoPort is wrapped by Parse's errors for a name that is no port of the
// switch.
var ErrNoPort = errors.New("no port")

// Parse returns the port a name denotes. The name must be spelled exactly
// as the NOS spells it (no leading zeros), so each port has one name and a
// port cannot be cabled twice under two spellings. A whole port that is
// broken out, and a sub-port of a port that is not, are refused with what
// to write instead.
func (p *Ports) Parse(name string) (Port, error) {
	pt, ok := p.parse(name)
	if !ok || pt.N < 1 || pt.N > p.ports() {
		return Port{}, fmt.Errorf("%w %q (its ports are %s)", ErrNoPort, name, p.Range())
	}
	split := p.split[pt.N]
	switch {
	case pt.Sub == 0 && split > 0:
		return Port{}, fmt.Errorf("%w %q: port %s is broken out into %d, use %s..%s", ErrNoPort, name,
			name, split, p.Name(Port{pt.N, 1}), p.Name(Port{pt.N, split}))
	case pt.Sub > 0 && split == 0:
		hint := "it cannot be broken out"
		if modes := p.model.Breakouts(pt.N); len(modes) > 0 {
			hint = fmt.Sprintf("declare a breakout of %s into %s first", p.Name(Port{N: pt.N}), joinInts(modes))
		}
		return Port{}, fmt.Errorf("%w %q: port %s is not broken out (%s)", ErrNoPort, name, p.Name(Port{N: pt.N}), hint)
	case pt.Sub > split:
		return Port{}, fmt.Errorf("%w %q: port %s is broken out into %d (%s..%s)", ErrNoPort, name,
			p.Name(Port{N: pt.N}), split, p.Name(Port{pt.N, 1}), p.Name(Port{pt.N, split}))
	}
	if want := p.Name(pt); want != name {
		return Port{}, fmt.Errorf("%w %q (did you mean %q?)", ErrNoPort, name, want)
	}
	return pt, nil
}

// parse reads the syntax of a port name; Parse checks it against the
// switch.
func (p *Ports) parse(name string) (Port, bool) {
	if p.model.Generic() {
		rest, ok := strings.CutPrefix(name, p.prefix)
		if !ok {
			return Port{}, false
		}
		num, sub, hasSub := strings.Cut(rest, "s")
		n, ok := atoi(num)
		if !ok {
			return Port{}, false
		}
		if !hasSub {
			return Port{N: n}, true
		}
		s, ok := atoi(sub)
		return Port{N: n, Sub: s + 1}, ok
	}
	switch p.nos {
	case EOS:
		rest, ok := strings.CutPrefix(name, "Ethernet")
		if !ok {
			return Port{}, false
		}
		num, lane, hasLane := strings.Cut(rest, "/")
		n, ok := atoi(num)
		g := p.model.group(n)
		if !ok || g == nil || hasLane != (g.Lanes > 1) {
			return Port{}, false
		}
		if !hasLane {
			return Port{N: n}, true
		}
		l, ok := atoi(lane)
		if !ok || l < 1 || l > g.Lanes {
			return Port{}, false
		}
		if split := p.split[n]; split > 0 {
			step := g.Lanes / split
			if (l-1)%step != 0 {
				return Port{}, false
			}
			return Port{N: n, Sub: (l-1)/step + 1}, true
		}
		return Port{N: n, Sub: l - 1}, true // Sub > 0: a lane of a whole port, refused by Parse
	case NXOS:
		rest, ok := strings.CutPrefix(name, "Ethernet1/")
		if !ok {
			return Port{}, false
		}
		num, sub, hasSub := strings.Cut(rest, "/")
		n, ok := atoi(num)
		if !ok {
			return Port{}, false
		}
		if !hasSub {
			return Port{N: n}, true
		}
		s, ok := atoi(sub)
		return Port{N: n, Sub: s}, ok && s >= 1
	case Junos:
		_, rest, ok := strings.Cut(name, "-0/0/")
		if !ok {
			return Port{}, false
		}
		num, ch, hasCh := strings.Cut(rest, ":")
		n, ok := atoi(num)
		if !ok {
			return Port{}, false
		}
		if !hasCh {
			return Port{N: n + 1}, true
		}
		c, ok := atoi(ch)
		return Port{N: n + 1, Sub: c + 1}, ok
	case SONiC:
		num, ok := strings.CutPrefix(name, "Ethernet")
		idx, ok2 := atoi(num)
		if !ok || !ok2 {
			return Port{}, false
		}
		for _, g := range p.model.Groups {
			for n := g.First; n <= g.Last; n++ {
				base := p.laneBase(n)
				if idx < base || idx >= base+g.Lanes {
					continue
				}
				off := idx - base
				split := p.split[n]
				if split == 0 {
					return Port{N: n, Sub: off}, true // off > 0: refused by Parse
				}
				step := g.Lanes / split
				if off%step != 0 {
					return Port{}, false
				}
				return Port{N: n, Sub: off/step + 1}, true
			}
		}
	}
	return Port{}, false
}

// atoi reads a decimal number without sign or leading zeros (Parse refuses
// other spellings by comparing with Name).
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 6 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// Range describes the switch's whole ports for messages: "Ethernet1/1..Ethernet1/66".
func (p *Ports) Range() string {
	n := p.ports()
	if n == 0 {
		return "none"
	}
	if n == unbounded {
		return p.Name(Port{N: 1}) + ".."
	}
	return p.Name(Port{N: 1}) + ".." + p.Name(Port{N: n})
}

// Translate returns the name in `to` of the port named name here: the same
// front-panel port (and sub-port), named as to's NOS names it. It fails
// when to's model lacks the port or cannot split it the same way.
func (p *Ports) Translate(name string, to *Ports) (string, error) {
	pt, err := p.Parse(name)
	if err != nil {
		return "", err
	}
	if pt.N > to.ports() {
		return "", fmt.Errorf("%w: port %s is front-panel port %d, %s/%s has %d", ErrNoPort, name, pt.N, to.model.Vendor, to.model.Name, to.ports())
	}
	if split := p.split[pt.N]; split > 0 && to.split[pt.N] != split {
		if err := to.Breakout(to.Name(Port{N: pt.N}), split); err != nil {
			return "", fmt.Errorf("port %s: %w", name, err)
		}
	}
	return to.Name(pt), nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
