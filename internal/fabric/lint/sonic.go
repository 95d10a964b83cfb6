package lint

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// SONiC, "Dynamic Port Breakout" HLD: BREAKOUT_CFG holds a parent port's
// breakout mode (KxSPEED[...], K sub-ports); the sub-ports are PORT
// entries with their lanes, created by the breakout.
const sonicDPB = "https://github.com/sonic-net/SONiC/blob/master/doc/dynamic-port-breakout/sonic-dynamic-port-breakout-HLD.md"

// sonic lints a CONFIG_DB patch (config_db.json). The renderer sets a
// port's lanes only through a breakout, so a PORT entry with lanes is a
// sub-port: its front-panel port (index) must be broken out, into as many
// sub-ports as the mode says. Ports the patch names (PORT, INTERFACE,
// VLAN_MEMBER, ACL_TABLE ports) go to the platform hooks. Findings are
// about the whole file (line 0): JSON has no line a switch applies.
func sonic(device string, f File) *report {
	r := newReport(device, f.Name)
	var db map[string]map[string]map[string]any
	if err := json.Unmarshal([]byte(f.Content), &db); err != nil {
		r.add(0, "sonic/json", "CONFIG_DB patch is not a table -> key -> fields object: %v", err)
		return r
	}
	for key := range db["PORT"] {
		r.iface(0, key)
	}
	for key := range db["INTERFACE"] {
		name, _, _ := strings.Cut(key, "|")
		r.iface(0, name)
	}
	for key := range db["VLAN_MEMBER"] {
		if _, name, ok := strings.Cut(key, "|"); ok {
			r.iface(0, name)
		}
	}
	for _, t := range db["ACL_TABLE"] {
		if ports, ok := t["ports"].([]any); ok {
			for _, p := range ports {
				if s, ok := p.(string); ok {
					r.iface(0, s)
				}
			}
		}
	}
	field := func(key, name string) string {
		s, _ := db["PORT"][key][name].(string)
		return s
	}
	subs := map[string][]string{} // front-panel index -> PORT keys with lanes
	for _, key := range slices.Sorted(mapsKeys(db["PORT"])) {
		if field(key, "lanes") != "" {
			subs[field(key, "index")] = append(subs[field(key, "index")], key)
		}
	}
	parents := map[string]string{} // index -> BREAKOUT_CFG key
	for _, parent := range slices.Sorted(mapsKeys(db["BREAKOUT_CFG"])) {
		mode, _ := db["BREAKOUT_CFG"][parent]["brkout_mode"].(string)
		k, err := strconv.Atoi(mode[:max(0, strings.Index(mode, "x"))])
		idx := field(parent, "index")
		switch {
		case err != nil || k < 1:
			r.add(0, "sonic/breakout", "BREAKOUT_CFG|%s: brkout_mode %q is not NxSPEED[...] (%s)", parent, mode, sonicDPB)
		case field(parent, "lanes") == "":
			r.add(0, "sonic/breakout", "BREAKOUT_CFG|%s breaks the port out but PORT|%s, its first sub-port, has no lanes (%s)", parent, parent, sonicDPB)
		case len(subs[idx]) != k:
			r.add(0, "sonic/breakout", "BREAKOUT_CFG|%s is mode %s, %d sub-ports, but the PORT entries of front-panel port %s with lanes are %s (%s)", parent, mode, k, idx, strings.Join(subs[idx], ", "), sonicDPB)
		}
		parents[idx] = parent
	}
	for _, idx := range slices.Sorted(mapsKeys(subs)) {
		if _, ok := parents[idx]; !ok {
			r.add(0, "sonic/breakout-before-use", "PORT %s lays out lanes of front-panel port %s, which no BREAKOUT_CFG entry breaks out: the sub-ports exist only after the breakout (%s)", strings.Join(subs[idx], ", "), idx, sonicDPB)
		}
	}
	return r
}
