package hostfacts

import (
	"fmt"
	"strconv"
	"strings"
)

// NVLinkStatus is one GPU of `nvidia-smi nvlink --status`.
type NVLinkStatus struct {
	Index    int
	UUID     string
	Up, Down int // links with a speed, links <inactive>
}

// ParseNVLinkStatus parses `nvidia-smi nvlink --status`:
//
//	GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-...)
//	         Link 0: 25 GB/s
//	         Link 1: <inactive>
func ParseNVLinkStatus(text string) ([]NVLinkStatus, error) {
	var out []NVLinkStatus
	for n, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		where := fmt.Sprintf("line %d", n+1)
		switch {
		case t == "":
		case strings.HasPrefix(t, "GPU "):
			head, uuid, ok := cutUUID(t)
			idx, _, ok2 := strings.Cut(strings.TrimPrefix(head, "GPU "), ":")
			i, isNum := natoi(idx)
			if !ok || !ok2 || !isNum {
				return nil, parseError("nvidia-smi nvlink --status", where, fmt.Sprintf("%q is not GPU N: NAME (UUID: ...)", t))
			}
			out = append(out, NVLinkStatus{Index: i, UUID: uuid})
		case strings.HasPrefix(t, "Link "):
			_, v, ok := strings.Cut(t, ":")
			if !ok || len(out) == 0 {
				return nil, parseError("nvidia-smi nvlink --status", where, fmt.Sprintf("%q is not Link N: SPEED under a GPU line", t))
			}
			g := &out[len(out)-1]
			if v = strings.TrimSpace(v); strings.Contains(v, "inactive") {
				g.Down++
			} else {
				g.Up++
			}
		default:
			return nil, parseError("nvidia-smi nvlink --status", where, fmt.Sprintf("unexpected line %q", t))
		}
	}
	return out, nil
}

// IBPort is one port of an RDMA device, from ibstat or sysfs.
type IBPort struct {
	Device    string // mlx5_0
	Port      int
	HCAType   string // MT4129
	Firmware  string
	State     string // ACTIVE, DOWN, INIT, ARMED (upper case)
	PhysState string // LinkUp, Disabled, Polling
	RateGbps  int
	LinkLayer string // InfiniBand or Ethernet
	// From sysfs only:
	Netdev   string
	PCIBusID string
	NUMA     int // -1 unknown
	RoCEGID  int // -1 unknown
	Uverbs   string
}

// ParseIBStat parses `ibstat` (every CA, every port).
func ParseIBStat(text string) ([]IBPort, error) {
	var out []IBPort
	var ca, typ, fw string
	var cur *IBPort
	for n, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		where := fmt.Sprintf("line %d", n+1)
		if name, ok := strings.CutPrefix(t, "CA '"); ok {
			ca, typ, fw, cur = strings.TrimSuffix(name, "'"), "", "", nil
			if ca == "" {
				return nil, parseError("ibstat", where, "a CA without a name")
			}
			continue
		}
		k, v, ok := strings.Cut(t, ":")
		if !ok || ca == "" {
			return nil, parseError("ibstat", where, fmt.Sprintf("unexpected line %q", t))
		}
		v = strings.TrimSpace(v)
		switch k {
		case "CA type":
			typ = v
		case "Firmware version":
			fw = v
		case "State":
			if cur != nil {
				cur.State = strings.ToUpper(v)
			}
		case "Physical state":
			if cur != nil {
				cur.PhysState = v
			}
		case "Rate":
			if cur != nil {
				// Gb/s; SDR is 2.5, hence a float. Anything else is not ibstat.
				r, err := strconv.ParseFloat(v, 64)
				if err != nil || r < 0 || r > 1e6 {
					return nil, parseError("ibstat", where, fmt.Sprintf("rate %q is not a number of Gb/s", v))
				}
				cur.RateGbps = int(r)
			}
		case "Link layer":
			if cur != nil {
				cur.LinkLayer = v
			}
		default:
			if p, ok := strings.CutPrefix(k, "Port "); ok && v == "" {
				pn, isNum := natoi(p)
				if !isNum {
					return nil, parseError("ibstat", where, fmt.Sprintf("port %q is not a number", p))
				}
				out = append(out, IBPort{Device: ca, Port: pn, HCAType: typ, Firmware: fw, NUMA: -1, RoCEGID: -1})
				cur = &out[len(out)-1]
			}
		}
	}
	return out, nil
}
