package hostfacts

import (
	"fmt"
	"strconv"
	"strings"
)

// ListGPU is one GPU of `nvidia-smi -L` with its MIG devices.
type ListGPU struct {
	Index   int
	Product string
	UUID    string
	MIG     []ListMIG
}

// ListMIG is a MIG device line: "  MIG 3g.40gb     Device  0: (UUID: MIG-...)".
type ListMIG struct {
	Profile string // 3g.40gb
	Device  int    // the MIG device index on its GPU
	UUID    string
}

// ParseList parses `nvidia-smi -L`:
//
//	GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-950792bf-...)
//	  MIG 3g.40gb     Device  0: (UUID: MIG-b3061c09-...)
func ParseList(text string) ([]ListGPU, error) {
	var out []ListGPU
	for n, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		where := fmt.Sprintf("line %d", n+1)
		head, uuid, ok := cutUUID(t)
		if !ok {
			return nil, parseError("nvidia-smi -L", where, fmt.Sprintf("%q has no (UUID: ...)", t))
		}
		switch {
		case strings.HasPrefix(head, "GPU "):
			idx, product, ok := strings.Cut(strings.TrimPrefix(head, "GPU "), ":")
			i, isNum := natoi(idx)
			if !ok || !isNum || !strings.HasPrefix(uuid, "GPU-") {
				return nil, parseError("nvidia-smi -L", where, fmt.Sprintf("%q is not GPU N: NAME (UUID: GPU-...)", t))
			}
			out = append(out, ListGPU{Index: i, Product: strings.TrimSpace(product), UUID: uuid})
		case strings.HasPrefix(head, "MIG "):
			f := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(head, "MIG "), ":"))
			// [profile, "Device", "N"]
			if len(out) == 0 || len(f) != 3 || f[1] != "Device" || !strings.HasPrefix(uuid, "MIG-") {
				return nil, parseError("nvidia-smi -L", where, fmt.Sprintf("%q is not MIG PROFILE Device N: (UUID: MIG-...) under a GPU line", t))
			}
			d, isNum := natoi(f[2])
			if !isNum {
				return nil, parseError("nvidia-smi -L", where, fmt.Sprintf("device number %q", f[2]))
			}
			g := &out[len(out)-1]
			g.MIG = append(g.MIG, ListMIG{Profile: f[0], Device: d, UUID: uuid})
		default:
			return nil, parseError("nvidia-smi -L", where, fmt.Sprintf("%q is neither a GPU nor a MIG line", t))
		}
	}
	return out, nil
}

// cutUUID splits "HEAD (UUID: X)" into HEAD and X.
func cutUUID(s string) (head, uuid string, ok bool) {
	i := strings.LastIndex(s, "(UUID: ")
	if i < 0 || !strings.HasSuffix(s, ")") {
		return "", "", false
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+len("(UUID: ") : len(s)-1]), true
}

// GPUInstance is one row of `nvidia-smi mig -lgi`.
type GPUInstance struct {
	GPU       int
	Profile   string // 3g.40gb
	ProfileID int
	ID        int // GPU instance ID
	Start     int // placement start slot
	Size      int // placement size in memory slots
}

// ParseLGI parses `nvidia-smi mig -lgi`:
//
//	| GPU   Name             Profile  Instance   Placement  |
//	|                          ID       ID       Start:Size |
//	|=======================================================|
//	|   0  MIG 1g.10gb         19        7          4:1     |
func ParseLGI(text string) ([]GPUInstance, error) {
	var out []GPUInstance
	body := false
	for n, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "|==") {
			body = true
			continue
		}
		if !body || !strings.HasPrefix(t, "|") || !strings.HasSuffix(t, "|") {
			continue
		}
		f := strings.Fields(strings.Trim(t, "|"))
		if len(f) == 0 {
			continue
		}
		// [gpu, "MIG", profile, profileID, instanceID, start:size]
		where := fmt.Sprintf("line %d", n+1)
		if len(f) != 6 || f[1] != "MIG" {
			return nil, parseError("nvidia-smi mig -lgi", where, fmt.Sprintf("%q is not GPU MIG PROFILE PROFILE-ID INSTANCE-ID START:SIZE", t))
		}
		ints, ok := atois(f[0], f[3], f[4])
		start, size, ok2 := strings.Cut(f[5], ":")
		se, ok3 := atois(start, size)
		if !ok || !ok2 || !ok3 {
			return nil, parseError("nvidia-smi mig -lgi", where, fmt.Sprintf("%q has a column that is not a whole number", t))
		}
		if se[1] < 1 {
			return nil, parseError("nvidia-smi mig -lgi", where, fmt.Sprintf("%q places an instance of size %d; a placement holds at least one slot", t, se[1]))
		}
		out = append(out, GPUInstance{GPU: ints[0], Profile: f[2], ProfileID: ints[1], ID: ints[2], Start: se[0], Size: se[1]})
	}
	return out, nil
}

// MIGMinors maps a capability path ("gpu0/gi1/access", "gpu0/gi1/ci0/access")
// to the minor of /dev/nvidia-caps/nvidia-capN. The gpuN in a path is the
// GPU's device minor, not its index.
type MIGMinors map[string]int

// ParseMIGMinors parses /proc/driver/nvidia-caps/mig-minors ("PATH MINOR"
// per line).
func ParseMIGMinors(text string) (MIGMinors, error) {
	out := MIGMinors{}
	for n, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m, ok := natoi(safeIndex(f, 1))
		if len(f) != 2 || !ok {
			return nil, parseError("mig-minors", fmt.Sprintf("line %d", n+1), fmt.Sprintf("%q is not PATH MINOR", strings.TrimSpace(line)))
		}
		out[f[0]] = m
	}
	return out, nil
}

// Access returns the minors granting access to GPU instance gi and its
// compute instance ci on the GPU with device minor gpuMinor (0 when unknown).
func (m MIGMinors) Access(gpuMinor, gi, ci int) (giCap, ciCap int) {
	p := fmt.Sprintf("gpu%d/gi%d", gpuMinor, gi)
	return m[p+"/access"], m[fmt.Sprintf("%s/ci%d/access", p, ci)]
}

func safeIndex(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// atois parses whole numbers (natoi) and reports whether all were.
func atois(ss ...string) ([]int, bool) {
	out := make([]int, len(ss))
	for i, s := range ss {
		n, ok := natoi(s)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// natoi parses a whole number written as digits only: the indices, IDs
// and counts these tools print are never negative and never signed, and
// strconv.Atoi would take "-1" and "+1".
func natoi(s string) (int, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
