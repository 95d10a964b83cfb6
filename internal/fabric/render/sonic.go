package render

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// renderSONiC writes a CONFIG_DB patch (config_db.json: the VXLAN, VRF,
// VLAN, interface and ACL tables, merged with "config load" or apply-patch;
// it does not replace PORT's hardware fields) and the frr.conf that SONiC's
// bgp container loads when docker_routing_config_mode is split-unified.
// SONiC has no VXLAN group policy, so job segmentation is rendered as
// per-port ACL tables.
func renderSONiC(d *fabric.Device) ([]File, error) {
	for i := range d.VRFs {
		if d.VRFs[i].L3VLAN == 0 {
			return nil, unsupported("SONiC maps an L3VNI through a VLAN, but VRF %s has no L3 VLAN (TenantIDs.L3VLAN)", d.VRFs[i].Name)
		}
	}
	db := configDB{}
	db.set("DEVICE_METADATA", "localhost", obj{
		"hostname": d.Name, "bgp_asn": strconv.FormatUint(uint64(d.ASN), 10),
		"docker_routing_config_mode": "split-unified",
		"type":                       map[fabric.Role]string{fabric.RoleLeaf: "LeafRouter", fabric.RoleSpine: "SpineRouter", fabric.RoleSuperSpine: "SpineRouter"}[d.Role],
	})
	// Breakouts first: the PORT entries below may be sub-ports.
	if err := sonicBreakouts(db, d); err != nil {
		return nil, err
	}
	db.set("LOOPBACK_INTERFACE", "Loopback0", obj{})
	db.set("LOOPBACK_INTERFACE", "Loopback0|"+d.Loopback.String()+"/32", obj{})
	for _, u := range d.Uplinks {
		db.merge("PORT", u.Port, obj{"admin_status": "up", "mtu": "9100", "description": uplinkDescription(u)})
		if u.Unnumbered() {
			db.set("INTERFACE", u.Port, obj{"ipv6_use_link_local_only": "enable"})
		} else {
			db.set("INTERFACE", u.Port, obj{})
			db.set("INTERFACE", u.Port+"|"+u.Address.String(), obj{})
		}
	}
	if d.Role == fabric.RoleLeaf {
		sonicLeaf(db, d)
	}
	b, err := json.MarshalIndent(db, "", "    ")
	if err != nil {
		return nil, err
	}
	conf, err := frrConf(d, frrStyle{vrfName: sonicVRFName})
	if err != nil {
		return nil, err
	}
	files := []File{
		{Name: "config_db.json", Content: string(b) + "\n"},
		{Name: "frr.conf", Content: conf},
	}
	return files, nil
}

// sonicVRFName: SONiC VRF names start with "Vrf" and, being Linux
// interfaces, hold at most 15 characters.
func sonicVRFName(v *fabric.VRF) string {
	if n := "Vrf_" + v.Name; len(n) <= 15 {
		return n
	}
	return "Vrf" + strconv.Itoa(int(v.RD.Num))
}

type obj = map[string]any

// merge adds fields to an entry, keeping those it has (a sub-port's lanes).
func (db configDB) merge(table, key string, fields obj) {
	e, ok := db[table][key]
	if !ok {
		db.set(table, key, fields)
		return
	}
	for k, v := range fields {
		e[k] = v
	}
}

// configDB is CONFIG_DB as table -> key -> fields; encoding/json sorts the
// keys, so the output is stable.
type configDB map[string]map[string]obj

func (db configDB) set(table, key string, fields obj) {
	if db[table] == nil {
		db[table] = map[string]obj{}
	}
	db[table][key] = fields
}

func sonicLeaf(db configDB, d *fabric.Device) {
	if len(d.VRFs) > 0 {
		db.set("VXLAN_TUNNEL", "vtep", obj{"src_ip": d.Loopback.String()})
		db.set("VXLAN_EVPN_NVO", "nvo", obj{"source_vtep": "vtep"})
	}
	mapVNI := func(vlan uint16, vni uint32) {
		v := fmt.Sprintf("Vlan%d", vlan)
		db.set("VXLAN_TUNNEL_MAP", fmt.Sprintf("vtep|map_%d_%s", vni, v), obj{"vlan": v, "vni": strconv.FormatUint(uint64(vni), 10)})
	}
	for i := range d.VRFs {
		v := &d.VRFs[i]
		name := sonicVRFName(v)
		db.set("VRF", name, obj{"vni": strconv.FormatUint(uint64(v.L3VNI), 10)})
		vl := fmt.Sprintf("Vlan%d", v.L3VLAN)
		db.set("VLAN", vl, obj{"vlanid": strconv.Itoa(int(v.L3VLAN))})
		db.set("VLAN_INTERFACE", vl, obj{"vrf_name": name})
		mapVNI(v.L3VLAN, v.L3VNI)
	}
	if d.AnycastMAC != "" {
		db.set("SAG", "GLOBAL", obj{"gateway_mac": d.AnycastMAC})
	}
	for i := range d.Ports {
		p := &d.Ports[i]
		admin := "up"
		if p.Quarantined {
			admin = "down"
		}
		db.merge("PORT", p.Name, obj{"admin_status": admin, "mtu": "9100", "description": portDescription(p)})
		if !p.Assigned() {
			continue // no INTERFACE entry: no address, no VRF
		}
		v := vrfOf(d, p)
		if p.VLANAware() {
			vl := fmt.Sprintf("Vlan%d", p.VLAN)
			db.set("VLAN", vl, obj{"vlanid": strconv.Itoa(int(p.VLAN))})
			db.set("VLAN_MEMBER", vl+"|"+p.Name, obj{"tagging_mode": "untagged"})
			db.set("VLAN_INTERFACE", vl, obj{"vrf_name": sonicVRFName(v), "static_anycast_gateway": "true"})
			for _, g := range []fmtPrefix{{p.Gateway4, ""}, {p.Gateway6, ""}} {
				if g.p.IsValid() {
					db.set("VLAN_INTERFACE", vl+"|"+g.p.String(), obj{})
				}
			}
			mapVNI(p.VLAN, p.L2VNI)
		} else {
			db.set("INTERFACE", p.Name, obj{"vrf_name": sonicVRFName(v)})
			for _, a := range []fmtPrefix{{p.IPv4, ""}, {p.IPv6, ""}} {
				if a.p.IsValid() {
					db.set("INTERFACE", p.Name+"|"+a.p.String(), obj{})
				}
			}
		}
		sonicACL(db, d, p)
	}
}

// sonicACL renders a port's ingress ACL (portACL: the server-port guard,
// then the job segmentation) as L3 and L3V6 tables bound to the port,
// rules in priority order.
func sonicACL(db configDB, d *fabric.Device, p *fabric.Port) {
	for _, fam := range []struct {
		suffix, typ, field, srcField, ipType, icmp string
		v6                                         bool
	}{
		{"V4", "L3", "DST_IP", "SRC_IP", "IPV4ANY", "1", false},
		{"V6", "L3V6", "DST_IPV6", "SRC_IPV6", "IPV6ANY", "58", true},
	} {
		entries, permitRest, ok := portACL(d, p, fam.v6, true)
		if !ok {
			return
		}
		table := "JF_" + sanitize(p.Name) + "_" + fam.suffix
		desc := fmt.Sprintf("jobfabric server-port guard of %s", p.Name)
		if p.ACL != nil {
			desc += fmt.Sprintf(", then job segmentation as an ACL (SONiC has no VXLAN group policy): group %d", p.Group)
		}
		db.set("ACL_TABLE", table, obj{"type": fam.typ, "stage": "ingress", "ports": []string{p.Name}, "policy_desc": desc})
		n := map[string]int{} // rules are numbered per kind, so a job's change stays in its kind
		prio := 9000
		for _, e := range entries {
			srcs := e.src
			if len(srcs) == 0 {
				srcs = []netip.Prefix{{}} // any source
			}
			for _, src := range srcs {
				r := obj{"PRIORITY": strconv.Itoa(prio), "PACKET_ACTION": map[bool]string{true: "FORWARD", false: "DROP"}[e.permit]}
				if e.dst.IsValid() {
					r[fam.field] = e.dst.String()
				} else {
					r["IP_TYPE"] = fam.ipType
				}
				if src.IsValid() {
					r[fam.srcField] = src.String()
				}
				if e.icmp {
					r["IP_PROTOCOL"] = fam.icmp
				}
				prio--
				n[e.kind]++
				db.set("ACL_RULE", fmt.Sprintf("%s|%s_%d", table, strings.ToUpper(strings.ReplaceAll(e.kind, "-", "_")), n[e.kind]), r)
			}
		}
		rest := "DENY_ALL"
		if permitRest {
			rest = "PERMIT_ALL"
		}
		db.set("ACL_RULE", table+"|"+rest, obj{"PRIORITY": "1", "PACKET_ACTION": map[bool]string{true: "FORWARD", false: "DROP"}[permitRest], "IP_TYPE": fam.ipType})
	}
}
