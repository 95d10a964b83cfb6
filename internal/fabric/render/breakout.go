package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
)

// breakout is one declared breakout of a device, as the device's NOS
// names its ports: the switch must be told to split the port before any
// line names a sub-port, so every renderer writes these first.
type breakout struct {
	model  platform.Model
	n      int    // front-panel port, from 1
	parent string // the whole port's name
	into   int
	lanes  int // SerDes lanes of the whole port
	speed  int // Gb/s of the whole port
	subs   []string
}

// subSpeed is the Gb/s of one sub-port.
func (b breakout) subSpeed() int { return b.speed / b.into }

// subLanes is the number of lanes of one sub-port.
func (b breakout) subLanes() int { return b.lanes / b.into }

// breakouts lists d's breakouts in port order. d is already in its target
// NOS's names (forPlatform).
func breakouts(d *fabric.Device) []breakout {
	if len(d.Breakouts) == 0 {
		return nil
	}
	ports := devicePorts(d)
	m := ports.Model()
	var out []breakout
	for _, n := range ports.BrokenOut() {
		g, ok := m.Group(n)
		if !ok {
			continue // validated with the topology
		}
		b := breakout{model: m, n: n, parent: ports.Name(platform.Port{N: n}), into: ports.Split(n), lanes: g.Lanes, speed: g.Speed}
		for s := 1; s <= b.into; s++ {
			b.subs = append(b.subs, ports.Name(platform.Port{N: n, Sub: s}))
		}
		out = append(out, b)
	}
	return out
}

// nxosBreakoutMaps are the map names of `interface breakout module M port
// P map <map>` that Cisco documents for Nexus 9000 ports. Cisco
// Nexus-as-Code, "Breakout Interface" (the command and its map choices):
// https://netascode.cisco.com/docs/data_models/vxlan/topology/interface/breakout_interface
// and Cisco, "Configuring Breakout on High-Bandwidth Interfaces" (the
// command reloads the port and removes its configuration):
// https://developer.cisco.com/docs/cisco-nexus-3000-and-9000-series-nx-api-rest-sdk-user-guide-and-api-reference-release-9-2x/configuring-breakout-on-high-bandwidth-interfaces
var nxosBreakoutMaps = []string{"10g-4x", "25g-4x", "50g-2x", "50g-4x", "100g-2x", "100g-4x", "200g-2x"}

// nxosBreakouts writes one `interface breakout` line per broken-out port:
// a 400G QSFP-DD port into 4 is map 100g-4x, into 2 map 200g-2x.
func nxosBreakouts(w *lines, d *fabric.Device) error {
	bs := breakouts(d)
	for _, b := range bs {
		m := fmt.Sprintf("%dg-%dx", b.subSpeed(), b.into)
		if !slices.Contains(nxosBreakoutMaps, m) {
			return unsupported("port %s of %s/%s into %d would be NX-OS breakout map %s, which is not one Cisco documents (%s)",
				b.parent, b.model.Vendor, b.model.Name, b.into, m, strings.Join(nxosBreakoutMaps, ", "))
		}
		w.add(0, "interface breakout module 1 port %d map %s", b.n, m)
	}
	if len(bs) > 0 {
		w.add(0, "!")
	}
	return nil
}

// junosBreakouts channelizes each broken-out port. Junos OS Evolved
// (QFX5220, QFX5230) does it on the interface: `number-of-sub-ports` and
// the sub-ports' `speed`; Junos OS (QFX5120) under the chassis:
// `channel-speed`. Juniper, "Configure Port Speed" (chassis and interface
// level, channelized interfaces):
// https://juniper.net/documentation/us/en/software/junos/interfaces-ethernet/topics/topic-map/configure-port.html
// and "Configure Port Speed on Chassis and Interface Level" (channel-speed):
// https://www.juniper.net/documentation/de/de/software/junos/interfaces-ethernet-switches/topics/concept/configure-port-speed.html
func junosBreakouts(set func(string, ...any), d *fabric.Device) {
	for _, b := range breakouts(d) {
		if b.model.Evolved {
			set("interfaces %s number-of-sub-ports %d", b.parent, b.into)
			set("interfaces %s speed %dg", b.parent, b.subSpeed())
			continue
		}
		set("chassis fpc 0 pic 0 port %d channel-speed %dg", b.n-1, b.subSpeed())
	}
}

// eosSpeed is EOS's speed keyword of a sub-port: the lane count follows
// the speed where the speed alone does not fix it (200g-2, 100g-1), a
// single-lane 10G or 25G has none.
func eosSpeed(b breakout) string {
	s, l := b.subSpeed(), b.subLanes()
	if l == 1 && s <= 25 {
		return strconv.Itoa(s) + "g"
	}
	return fmt.Sprintf("%dg-%d", s, l)
}

// eosBreakouts gives every sub-port of a broken-out port its speed and
// lane count. EOS exposes one interface per lane of a multi-lane port
// (Ethernet1/1..1/8 on an OSFP); an interface is active once the lanes
// before it are not taken by the primary's speed, so each sub-port's
// first lane gets the sub-port speed (4 x 200G: Ethernet1/1, 1/3, 1/5,
// 1/7 speed 200g-2). Arista EOS User Manual, "Layer 1 Profiles" (one
// interface per lane, breakouts): https://www.arista.com/jp/um-eos/eos-layer-1-profiles
// The lane-count keywords are EOS's as published configurations write
// them; no Arista command reference listing them was found.
func eosBreakouts(w *lines, d *fabric.Device) {
	for _, b := range breakouts(d) {
		for _, s := range b.subs {
			w.add(0, "interface %s", s)
			w.add(3, "speed %s", eosSpeed(b))
			w.add(0, "!")
		}
	}
}

// sonicBreakouts sets each broken-out port's breakout mode (BREAKOUT_CFG,
// the platform.json mode name) and the PORT entries of its sub-ports with
// their lanes, speed and front-panel index; the first sub-port keeps the
// parent's name. Lane numbers are the port map's (platform.json lanes:
// Ethernet0 is 0..7 on an SN5600). SONiC, "Dynamic Port Breakout" HLD:
// https://github.com/sonic-net/SONiC/blob/master/doc/dynamic-port-breakout/sonic-dynamic-port-breakout-HLD.md
func sonicBreakouts(db configDB, d *fabric.Device) error {
	for _, b := range breakouts(d) {
		g, _ := b.model.Group(b.n)
		mode, ok := g.SONiCModes[b.into]
		if !ok {
			return unsupported("port %s of %s/%s into %d: no SONiC breakout mode is known for it (the platform.json breakout_modes of the model are not in the platform table)",
				b.parent, b.model.Vendor, b.model.Name, b.into)
		}
		db.set("BREAKOUT_CFG", b.parent, obj{"brkout_mode": mode})
		base, err := strconv.Atoi(strings.TrimPrefix(b.parent, "Ethernet"))
		if err != nil {
			return fmt.Errorf("SONiC port name %q: %w", b.parent, err)
		}
		per := b.subLanes()
		for i, s := range b.subs {
			lanes := make([]string, per)
			for l := range lanes {
				lanes[l] = strconv.Itoa(base + i*per + l)
			}
			db.set("PORT", s, obj{"lanes": strings.Join(lanes, ","), "speed": strconv.Itoa(b.subSpeed() * 1000), "index": strconv.Itoa(b.n)})
		}
	}
	return nil
}
