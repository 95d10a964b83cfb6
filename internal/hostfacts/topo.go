package hostfacts

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Topo is the matrix of `nvidia-smi topo -m`: how every GPU and NIC pair
// is connected, and each GPU's CPU and NUMA affinity.
type Topo struct {
	// GPUs is the number of GPU rows (GPU0..GPUn-1, nvidia-smi indices).
	GPUs int
	// NICs are the RDMA device names of the NIC columns, in column order
	// (from the NIC legend, or the column header when there is none).
	NICs []string
	// cells[i][j] is the connection between device i and j, devices being
	// the GPUs then the NICs.
	cells [][]string
	// CPUAffinity and NUMAAffinity per GPU ("" / -1 when not given).
	CPUAffinity  []string
	NUMAAffinity []int
}

// Path ranks: lower is closer. NV# (NVLink) is closer than any PCIe path.
var pathRank = map[string]int{"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SOC": 6, "SYS": 6}

func rank(cell string) int {
	if n, ok := strings.CutPrefix(cell, "NV"); ok {
		if _, isNum := natoi(n); isNum {
			return pathRank["NV"]
		}
		return 99
	}
	if r, ok := pathRank[cell]; ok {
		return r
	}
	return 99
}

// ParseTopo parses `nvidia-smi topo -m` (with or without the NIC legend;
// tabs or spaces).
func ParseTopo(text string) (*Topo, error) {
	lines := strings.Split(text, "\n")
	hi := -1
	var header []string
	for i, l := range lines {
		f := strings.Fields(l)
		// The header starts with GPU0 like the first row; the row's next
		// cell is X (itself), the header's the next device's name.
		if len(f) > 1 && f[0] == "GPU0" && f[1] != "X" {
			hi, header = i, f
			break
		}
	}
	if hi < 0 {
		return nil, parseError("nvidia-smi topo -m", "header", "no column header row starting with GPU0")
	}
	// Device columns come first; the rest are affinity headers of one or
	// more words ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID").
	var devs []string
	for _, h := range header {
		if h == "CPU" || h == "NUMA" || h == "Affinity" || h == "GPU" {
			break
		}
		devs = append(devs, h)
	}
	rest := strings.Join(header[len(devs):], " ")
	var extras []string
	for _, name := range []string{"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"} {
		if strings.Contains(rest, name) {
			extras = append(extras, name)
		}
	}
	t := &Topo{}
	legend := map[string]string{}
	for _, l := range lines[hi+1:] {
		f := strings.Fields(l)
		if len(f) == 2 && strings.HasPrefix(f[0], "NIC") && strings.HasSuffix(f[0], ":") {
			legend[strings.TrimSuffix(f[0], ":")] = f[1]
		}
	}
	for i, d := range devs {
		want := fmt.Sprintf("GPU%d", i)
		if strings.HasPrefix(d, "GPU") {
			if d != want {
				return nil, parseError("nvidia-smi topo -m", "header", fmt.Sprintf("column %d is %s, want %s", i, d, want))
			}
			t.GPUs++
			continue
		}
		name := d
		if l, ok := legend[d]; ok {
			name = l
		}
		if slices.Contains(t.NICs, name) {
			return nil, parseError("nvidia-smi topo -m", d, fmt.Sprintf("NIC %s appears twice: column %s is a second %s", name, d, name))
		}
		t.NICs = append(t.NICs, name)
	}
	rows := map[string][]string{}
	for _, l := range lines[hi+1:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if f[0] == "Legend:" {
			break
		}
		rows[f[0]] = f[1:]
	}
	n := len(devs)
	t.cells = make([][]string, n)
	t.CPUAffinity = make([]string, t.GPUs)
	t.NUMAAffinity = make([]int, t.GPUs)
	for i, d := range devs {
		r, ok := rows[d]
		if !ok || len(r) < n {
			return nil, parseError("nvidia-smi topo -m", d, fmt.Sprintf("row has %d cells, want %d", len(r), n))
		}
		t.cells[i] = r[:n]
		if r[i] != "X" {
			return nil, parseError("nvidia-smi topo -m", d, fmt.Sprintf("diagonal cell is %q, want X", r[i]))
		}
		for j, c := range r[:n] {
			if rank(c) == 99 || (c == "X" && j != i) {
				return nil, parseError("nvidia-smi topo -m", d, fmt.Sprintf("cell %d is %q, not a connection type", j, c))
			}
		}
		if i < t.GPUs {
			t.NUMAAffinity[i] = -1
			for k, e := range extras {
				if n+k >= len(r) {
					break
				}
				v := r[n+k]
				switch e {
				case "CPU Affinity":
					if v != "N/A" {
						t.CPUAffinity[i] = v
					}
				case "NUMA Affinity":
					if x, ok := natoi(v); ok {
						t.NUMAAffinity[i] = x
					}
				}
			}
		}
	}
	for i := range t.cells {
		for j := range t.cells {
			if t.cells[i][j] != t.cells[j][i] {
				return nil, parseError("nvidia-smi topo -m", devs[i], fmt.Sprintf("matrix is not symmetric at %s/%s (%s vs %s)", devs[i], devs[j], t.cells[i][j], t.cells[j][i]))
			}
		}
	}
	return t, nil
}

// GPUNIC returns the connection between GPU g and NIC column n.
func (t *Topo) GPUNIC(g, n int) string { return t.cells[g][t.GPUs+n] }

// ClosestGPU returns the GPU NIC column n is best connected to, and the
// connection, when exactly one GPU is best and it shares a PCIe host
// bridge with the NIC (PIX, PXB, PHB); otherwise -1: a NIC that reaches
// every GPU of its socket equally (NODE) or across sockets (SYS) belongs
// to none of them. Names and indices play no part.
func (t *Topo) ClosestGPU(n int) (int, string) {
	best, bestRank, ties := -1, 99, 0
	for g := 0; g < t.GPUs; g++ {
		r := rank(t.GPUNIC(g, n))
		switch {
		case r < bestRank:
			best, bestRank, ties = g, r, 1
		case r == bestRank:
			ties++
		}
	}
	if best < 0 || ties != 1 || bestRank > pathRank["PHB"] {
		return -1, ""
	}
	return best, t.GPUNIC(best, n)
}

// NICNUMA returns the NUMA node of NIC column n: that of any GPU it
// reaches without crossing the inter-socket link (NODE or closer), -1
// when none.
func (t *Topo) NICNUMA(n int) int {
	for g := 0; g < t.GPUs; g++ {
		if rank(t.GPUNIC(g, n)) <= pathRank["NODE"] && t.NUMAAffinity[g] >= 0 {
			return t.NUMAAffinity[g]
		}
	}
	return -1
}

// NVLinkGroups partitions the GPUs into sets connected by NVLink (NV#
// cells, transitively), each sorted, ordered by their first GPU.
func (t *Topo) NVLinkGroups() [][]int {
	parent := make([]int, t.GPUs)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i := 0; i < t.GPUs; i++ {
		for j := i + 1; j < t.GPUs; j++ {
			if strings.HasPrefix(t.cells[i][j], "NV") {
				parent[find(i)] = find(j)
			}
		}
	}
	byRoot := map[int][]int{}
	for i := 0; i < t.GPUs; i++ {
		byRoot[find(i)] = append(byRoot[find(i)], i)
	}
	var out [][]int
	for _, g := range byRoot {
		sort.Ints(g)
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

// NVLinks returns the bonded NVLink count between GPUs a and b (NV18 ->
// 18), 0 when they are not NVLink-connected.
func (t *Topo) NVLinks(a, b int) int {
	c := t.cells[a][b]
	if !strings.HasPrefix(c, "NV") {
		return 0
	}
	n, _ := natoi(strings.TrimPrefix(c, "NV"))
	return n
}
