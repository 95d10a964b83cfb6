package labdeploy

import (
	"bufio"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// labConf is what the lab driver reads from a rendered frr.conf: the
// declarations a real NOS turns into kernel plumbing by itself (a VRF with
// its L3VNI, a port enslaved to a VRF), as opposed to the routing FRR
// applies.
type labConf struct {
	// VRFs in the order the config declares them.
	VRFs []labVRF
	// PortVRF maps every interface stanza to its VRF ("" for none).
	PortVRF map[string]string
	// Shutdown lists the interfaces whose stanza says `shutdown`: the
	// quarantined server ports, admin-down in the underlay.
	Shutdown map[string]bool
	// Loopback is the address of interface lo (the VTEP address).
	Loopback netip.Addr
}

type labVRF struct {
	Name string
	VNI  uint32
}

// parseLabConf reads the `vrf NAME / vni N` and `interface X [vrf Y]`
// stanzas and the loopback address of a frr.conf as the FRR renderer
// writes it (internal/fabric/render).
func parseLabConf(conf string) (*labConf, error) {
	lc := &labConf{PortVRF: map[string]string{}, Shutdown: map[string]bool{}}
	var routerID netip.Addr
	sc := bufio.NewScanner(strings.NewReader(conf))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	var vrf, iface string // the open top-level stanza
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "!") {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			vrf, iface = "", ""
			switch {
			case f[0] == "vrf" && len(f) == 2:
				vrf = f[1]
				lc.VRFs = append(lc.VRFs, labVRF{Name: vrf})
			case f[0] == "interface" && len(f) == 2:
				iface = f[1]
				lc.PortVRF[iface] = ""
			case f[0] == "interface" && len(f) == 4 && f[2] == "vrf":
				iface = f[1]
				lc.PortVRF[iface] = f[3]
			}
			continue
		}
		switch {
		case vrf != "" && f[0] == "vni" && len(f) >= 2:
			v, err := strconv.ParseUint(f[1], 10, 24)
			if err != nil || v == 0 {
				return nil, fmt.Errorf("frr.conf line %d: vrf %s has VNI %q, not a 24-bit number", n, vrf, f[1])
			}
			lc.VRFs[len(lc.VRFs)-1].VNI = uint32(v)
		case iface != "" && len(f) == 1 && f[0] == "shutdown":
			lc.Shutdown[iface] = true
		case iface == "lo" && len(f) == 3 && f[0] == "ip" && f[1] == "address":
			p, err := netip.ParsePrefix(f[2])
			if err != nil {
				return nil, fmt.Errorf("frr.conf line %d: loopback address %q: %v", n, f[2], err)
			}
			lc.Loopback = p.Addr()
		case len(f) == 3 && f[0] == "bgp" && f[1] == "router-id":
			if a, err := netip.ParseAddr(f[2]); err == nil && !routerID.IsValid() {
				routerID = a
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("frr.conf: %w", err)
	}
	if !lc.Loopback.IsValid() {
		lc.Loopback = routerID
	}
	seen := map[string]bool{}
	vnis := map[uint32]string{}
	for _, v := range lc.VRFs {
		if v.VNI == 0 {
			return nil, fmt.Errorf("frr.conf: vrf %s has no vni: the lab builds pure type-5 VRFs, each with an L3VNI", v.Name)
		}
		if seen[v.Name] {
			return nil, fmt.Errorf("frr.conf: vrf %s is declared twice", v.Name)
		}
		if o, dup := vnis[v.VNI]; dup {
			return nil, fmt.Errorf("frr.conf: vrfs %s and %s share VNI %d", o, v.Name, v.VNI)
		}
		seen[v.Name], vnis[v.VNI] = true, v.Name
	}
	for port, v := range lc.PortVRF {
		if v != "" && !seen[v] {
			return nil, fmt.Errorf("frr.conf: interface %s is in vrf %s, which the config does not declare", port, v)
		}
	}
	if len(lc.VRFs) > 0 && !lc.Loopback.Is4() {
		return nil, fmt.Errorf("frr.conf: no IPv4 loopback (interface lo / ip address) to source the VXLAN tunnels from")
	}
	return lc, nil
}

// vni returns the L3VNI of VRF name.
func (lc *labConf) vni(name string) uint32 {
	for _, v := range lc.VRFs {
		if v.Name == name {
			return v.VNI
		}
	}
	return 0
}
