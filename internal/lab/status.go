package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Status is what the lab's switches say: daemons, BGP sessions (underlay
// and EVPN), L3VNIs, and the routes of every VRF.
type Status struct {
	Prefix  string         `json:"prefix"`
	RunDir  string         `json:"runDir"`
	Devices []DeviceStatus `json:"devices"`
}

// DeviceStatus is one switch.
type DeviceStatus struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Daemons says whether zebra and bgpd answer.
	Daemons  bool      `json:"daemons"`
	Sessions []Session `json:"sessions"`
	VNIs     []VNI     `json:"vnis,omitempty"`
	VRFs     []VRF     `json:"vrfs,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Session is one BGP session of one address family.
type Session struct {
	AF       string `json:"af"` // ipv4 or evpn
	Peer     string `json:"peer"`
	Hostname string `json:"hostname,omitempty"`
	State    string `json:"state"`
	Prefixes int    `json:"prefixes"`
}

// VNI is an EVPN VNI of a leaf.
type VNI struct {
	VNI       uint32 `json:"vni"`
	Type      string `json:"type"`
	VRF       string `json:"vrf"`
	Interface string `json:"interface"`
}

// VRF is a routing table and its routes ("prefix via next-hop").
type VRF struct {
	Name   string   `json:"name"`
	Routes []string `json:"routes"`
}

// Established counts the device's established sessions of af.
func (d *DeviceStatus) Established(af string) (up, total int) {
	for _, s := range d.Sessions {
		if s.AF == af {
			total++
			if s.State == "Established" {
				up++
			}
		}
	}
	return up, total
}

// vtysh runs show commands on a device's daemons.
func (l *Lab) vtysh(ctx context.Context, d *Device, cmds ...string) ([]byte, error) {
	args := []string{"--vty_socket", d.Dir}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "vtysh", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("vtysh %s on %s: %v: %s", strings.Join(cmds, "; "), d.Name, err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Status asks every switch, in parallel.
func (l *Lab) Status(ctx context.Context) *Status {
	st := &Status{Prefix: l.Prefix, RunDir: l.RunDir, Devices: make([]DeviceStatus, len(l.Devices))}
	var wg sync.WaitGroup
	for i := range l.Devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.Devices[i] = l.deviceStatus(ctx, &l.Devices[i])
		}()
	}
	wg.Wait()
	return st
}

func (l *Lab) deviceStatus(ctx context.Context, d *Device) DeviceStatus {
	ds := DeviceStatus{Name: d.Name, Role: d.Role, Sessions: []Session{}}
	out, err := l.vtysh(ctx, d, "show bgp summary json")
	if err != nil {
		ds.Error = err.Error()
		return ds
	}
	ds.Daemons = true
	var sum map[string]struct {
		Peers map[string]struct {
			Hostname string `json:"hostname"`
			State    string `json:"state"`
			PfxRcd   int    `json:"pfxRcd"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(out, &sum); err == nil {
		for key, af := range map[string]string{"ipv4Unicast": "ipv4", "l2VpnEvpn": "evpn"} {
			for peer, p := range sum[key].Peers {
				ds.Sessions = append(ds.Sessions, Session{AF: af, Peer: peer, Hostname: p.Hostname, State: p.State, Prefixes: p.PfxRcd})
			}
		}
	}
	sort.Slice(ds.Sessions, func(i, j int) bool {
		a, b := ds.Sessions[i], ds.Sessions[j]
		if a.AF != b.AF {
			return a.AF > b.AF // ipv4 first
		}
		return a.Peer < b.Peer
	})
	if d.Role == "leaf" {
		if out, err := l.vtysh(ctx, d, "show evpn vni json"); err == nil {
			var vnis map[string]struct {
				VNI     uint32 `json:"vni"`
				Type    string `json:"type"`
				VRF     string `json:"tenantVrf"`
				VxlanIf string `json:"vxlanIf"`
			}
			if json.Unmarshal(out, &vnis) == nil {
				for _, v := range vnis {
					ds.VNIs = append(ds.VNIs, VNI{VNI: v.VNI, Type: v.Type, VRF: v.VRF, Interface: v.VxlanIf})
				}
				slices.SortFunc(ds.VNIs, func(a, b VNI) int { return int(a.VNI) - int(b.VNI) })
			}
		}
	}
	if out, err := l.vtysh(ctx, d, "show ip route vrf all json"); err == nil {
		ds.VRFs = parseRoutes(out)
	}
	return ds
}

// parseRoutes reads `show ip route vrf all json`: one JSON object per VRF,
// prefix -> routes.
func parseRoutes(out []byte) []VRF {
	type nexthop struct {
		IP            string `json:"ip"`
		InterfaceName string `json:"interfaceName"`
		DirectlyConn  bool   `json:"directlyConnected"`
		Active        bool   `json:"active"`
	}
	type route struct {
		Prefix   string    `json:"prefix"`
		Protocol string    `json:"protocol"`
		VRFName  string    `json:"vrfName"`
		Selected bool      `json:"selected"`
		Nexthops []nexthop `json:"nexthops"`
	}
	byVRF := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var obj map[string][]route
		if err := dec.Decode(&obj); err != nil {
			break
		}
		for _, rs := range obj {
			for _, r := range rs {
				if !r.Selected {
					continue
				}
				var hops []string
				for _, nh := range r.Nexthops {
					switch {
					case nh.IP != "":
						hops = append(hops, "via "+nh.IP+" dev "+nh.InterfaceName)
					case nh.InterfaceName != "":
						hops = append(hops, "dev "+nh.InterfaceName)
					}
				}
				byVRF[r.VRFName] = append(byVRF[r.VRFName], strings.Join(append([]string{r.Prefix, r.Protocol}, hops...), " "))
			}
		}
	}
	var vrfs []VRF
	for name, rs := range byVRF {
		slices.Sort(rs)
		vrfs = append(vrfs, VRF{Name: name, Routes: rs})
	}
	slices.SortFunc(vrfs, func(a, b VRF) int { return strings.Compare(a.Name, b.Name) })
	return vrfs
}

// Converged says whether every uplink of every switch has its underlay
// and EVPN sessions established, and if not, what is missing.
func (st *Status) Converged(l *Lab) (bool, string) {
	var missing []string
	for _, ds := range st.Devices {
		d := l.Device(ds.Name)
		if d == nil {
			continue
		}
		if !ds.Daemons {
			missing = append(missing, ds.Name+": daemons do not answer")
			continue
		}
		for _, af := range []string{"ipv4", "evpn"} {
			if up, _ := ds.Established(af); up < len(d.Uplinks) {
				missing = append(missing, fmt.Sprintf("%s: %d of %d %s sessions established", ds.Name, up, len(d.Uplinks), af))
			}
		}
	}
	return len(missing) == 0, strings.Join(missing, "; ")
}

// WaitConverged waits (at most timeout) until every switch has its
// underlay and EVPN sessions up; its error carries the switches' vtysh
// state (show bgp summary, show evpn vni, show ip route vrf all).
func (l *Lab) WaitConverged(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := l.Status(ctx).Converged(l)
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var b strings.Builder
			l.Dump(ctx, &b)
			return fmt.Errorf("the lab did not converge within %s: %s\n%s", timeout, why, b.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Dump writes each switch's vtysh view: BGP sessions, EVPN VNIs and the
// routes of every VRF; for a leaf also what zebra learnt from the type-5
// routes (router MACs and next hops per L3VNI, the BGP prefix routes) and
// the kernel state of each VRF namespace (links, the bridge's FDB, the
// neighbour table), where a missing remote router MAC shows.
func (l *Lab) Dump(ctx context.Context, w io.Writer) {
	for i := range l.Devices {
		d := &l.Devices[i]
		cmds := []string{"show bgp summary", "show ip route vrf all"}
		if d.Role == "leaf" {
			cmds = []string{"show bgp summary", "show evpn vni", "show ip route vrf all",
				"show evpn rmac vni all", "show evpn next-hops vni all", "show bgp l2vpn evpn route type prefix"}
		}
		for _, c := range cmds {
			out, err := l.vtysh(ctx, d, c)
			fmt.Fprintf(w, "==== %s: %s\n", d.Name, c)
			if err != nil {
				fmt.Fprintln(w, err)
				continue
			}
			w.Write(out)
		}
		if d.Role == "leaf" {
			l.dumpVRFNetns(ctx, d, w)
		}
	}
}

// dumpVRFNetns writes the kernel state of a leaf's VRF namespaces.
func (l *Lab) dumpVRFNetns(ctx context.Context, d *Device, w io.Writer) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		ns := e.Name()
		if !strings.HasPrefix(ns, d.VRFNetnsPrefix()) {
			continue
		}
		for _, c := range [][]string{{"ip", "-n", ns, "-d", "link"}, {"bridge", "-n", ns, "fdb"}, {"ip", "-n", ns, "neigh"}} {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			out, err := exec.CommandContext(cctx, c[0], c[1:]...).CombinedOutput()
			cancel()
			fmt.Fprintf(w, "==== %s: %s\n", d.Name, strings.Join(c, " "))
			if err != nil {
				fmt.Fprintln(w, err)
			}
			w.Write(out)
		}
	}
}
