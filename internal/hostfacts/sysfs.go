package hostfacts

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// ReadInfiniband reads every RDMA device port under dir of fsys (dir is
// "sys/class/infiniband" when fsys is rooted at /): type, firmware, port
// state, rate, link layer, and where the tree has them, the PCI address,
// NUMA node, netdev, verbs device and RoCE v2 GID index of each port.
func ReadInfiniband(fsys fs.FS, dir string) ([]IBPort, error) {
	devs, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []IBPort
	for _, d := range devs {
		dev := d.Name()
		base := path.Join(dir, dev)
		typ := readTrim(fsys, base, "hca_type")
		fw := readTrim(fsys, base, "fw_ver")
		pci, numa, netdevs, uverbs := pciInfo(fsys, base)
		ports, err := fs.ReadDir(fsys, path.Join(base, "ports"))
		if err != nil {
			return nil, fmt.Errorf("read %s ports: %w", dev, err)
		}
		for _, p := range ports {
			pn, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			pb := path.Join(base, "ports", p.Name())
			ip := IBPort{Device: dev, Port: pn, HCAType: typ, Firmware: fw, PCIBusID: pci, NUMA: numa, Uverbs: uverbs, RoCEGID: -1}
			// "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)"
			ip.State = strings.ToUpper(afterColon(readTrim(fsys, pb, "state")))
			ip.PhysState = afterColon(readTrim(fsys, pb, "phys_state"))
			ip.LinkLayer = readTrim(fsys, pb, "link_layer")
			if f := strings.Fields(readTrim(fsys, pb, "rate")); len(f) > 0 {
				if r, err := strconv.ParseFloat(f[0], 64); err == nil {
					ip.RateGbps = int(r)
				}
			}
			if ip.State == "" || ip.LinkLayer == "" {
				return nil, fmt.Errorf("%s port %d: no state or link_layer in %s", dev, pn, pb)
			}
			// Ports map to netdevs in order (mlx5: one port per PCI function).
			if pn-1 < len(netdevs) {
				ip.Netdev = netdevs[pn-1]
			}
			if ip.LinkLayer == "Ethernet" {
				ip.RoCEGID = roceV2GID(fsys, pb)
			}
			out = append(out, ip)
		}
	}
	return out, nil
}

// pciInfo follows DEV/device (a link to the PCI function): its address,
// NUMA node, network interfaces and verbs device.
func pciInfo(fsys fs.FS, base string) (pci string, numa int, netdevs []string, uverbs string) {
	numa = -1
	if target, err := fs.ReadLink(fsys, path.Join(base, "device")); err == nil {
		pci = path.Base(target)
	}
	if n, err := strconv.Atoi(readTrim(fsys, base, "device/numa_node")); err == nil && n >= 0 {
		numa = n
	}
	if es, err := fs.ReadDir(fsys, path.Join(base, "device/net")); err == nil {
		for _, e := range es {
			netdevs = append(netdevs, e.Name())
		}
		sort.Strings(netdevs)
	}
	if es, err := fs.ReadDir(fsys, path.Join(base, "device/infiniband_verbs")); err == nil && len(es) > 0 {
		uverbs = es[0].Name()
	}
	return pci, numa, netdevs, uverbs
}

// roceV2GID returns the lowest GID index whose type is "RoCE v2" and whose
// GID is an IPv4-mapped address (::ffff:a.b.c.d), -1 when none: that is
// the index NCCL_IB_GID_INDEX must name for RoCE v2 over IPv4.
func roceV2GID(fsys fs.FS, port string) int {
	es, err := fs.ReadDir(fsys, path.Join(port, "gid_attrs/types"))
	if err != nil {
		return -1
	}
	var idx []int
	for _, e := range es {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			idx = append(idx, n)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		typ, err := fs.ReadFile(fsys, path.Join(port, "gid_attrs/types", strconv.Itoa(i)))
		if err != nil || !strings.EqualFold(strings.TrimSpace(string(typ)), "RoCE v2") {
			continue // unused entries fail to read on a live system
		}
		gid, err := fs.ReadFile(fsys, path.Join(port, "gids", strconv.Itoa(i)))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(gid)), "0000:0000:0000:0000:0000:ffff:") {
			return i
		}
	}
	return -1
}

// ReadNUMA returns the NUMA node of a PCI device from
// sys/bus/pci/devices/ADDR/numa_node, -1 when unknown. busID may be in
// nvidia-smi's form (00000000:53:00.0) or sysfs' (0000:53:00.0).
func ReadNUMA(fsys fs.FS, busID string) int {
	addr := strings.ToLower(busID)
	if len(addr) == len("00000000:00:00.0") {
		addr = addr[4:]
	}
	n, err := strconv.Atoi(readTrim(fsys, path.Join("sys/bus/pci/devices", addr), "numa_node"))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func readTrim(fsys fs.FS, dir, name string) string {
	b, err := fs.ReadFile(fsys, path.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func afterColon(s string) string {
	if _, v, ok := strings.Cut(s, ":"); ok {
		return strings.TrimSpace(v)
	}
	return s
}

// errNotFound reports a missing file or directory through any fs.FS.
func errNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }
