package mig

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

func TestParseLGIPFixture(t *testing.T) {
	for src, data := range fixtureSources(t, "nvidia-smi-mig-lgip_h100-sxm5-80gb_4gpu_stackhpc.txt") {
		t.Run(src, func(t *testing.T) {
			rows, err := ParseLGIP(string(data))
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 28 {
				t.Fatalf("%d rows, want 28 (4 GPUs x 7 profiles)", len(rows))
			}
			cat, _ := Profiles("H100-80GB")
			perGPU := map[int][]string{}
			for _, r := range rows {
				perGPU[r.GPU] = append(perGPU[r.GPU], r.Name)
				p, err := Lookup("H100-80GB", r.Name)
				if err != nil {
					t.Errorf("GPU %d reports %s: %v", r.GPU, r.Name, err)
					continue
				}
				// An idle GPU: every instance is free, and the limits, IDs,
				// memory and SMs are the catalog's.
				got := [5]any{r.ID, r.Total, r.Free, r.MemoryGiB, r.SMs}
				want := [5]any{p.ID, p.MaxInstances, p.MaxInstances, p.MemoryGiB, p.SMs}
				if got != want || r.P2P {
					t.Errorf("GPU %d %s: id/total/free/mem/sm %v p2p %v, want %v p2p false", r.GPU, r.Name, got, r.P2P, want)
				}
			}
			var names []string
			for _, p := range cat {
				names = append(names, p.Name)
			}
			for gpu := 0; gpu < 4; gpu++ {
				if !reflect.DeepEqual(perGPU[gpu], names) {
					t.Errorf("GPU %d profiles %v, want %v", gpu, perGPU[gpu], names)
				}
			}
			// Engine counts from both lines of a row.
			want := map[string][6]int{ // DEC ENC CE JPEG OFA SM
				"1g.10gb":    {1, 0, 1, 1, 0, 16},
				"1g.10gb+me": {1, 0, 1, 1, 1, 16},
				"3g.40gb":    {3, 0, 3, 3, 0, 60},
				"7g.80gb":    {7, 0, 8, 7, 1, 132},
			}
			for _, r := range rows[:7] {
				if w, ok := want[r.Name]; ok {
					if got := [6]int{r.DEC, r.ENC, r.CE, r.JPEG, r.OFA, r.SMs}; got != w {
						t.Errorf("%s engines %v, want %v", r.Name, got, w)
					}
				}
			}
		})
	}
}

const lgipHeader = `+-----------------------------------------------------------------------------+
| GPU instance profiles:                                                      |
| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
|                              Free/Total   GiB              CE    JPEG  OFA  |
|=============================================================================|
`

func TestParseLGIP(t *testing.T) {
	cases := map[string]struct {
		text      string
		want      []LGIPRow
		wantField string
		wantMsg   string
	}{
		"empty output":         {text: ""},
		"MIG disabled message": {text: "No MIG-enabled devices found.\n"},
		"header only":          {text: lgipHeader},
		"in-use GPU, A100 row without second line": {
			text: lgipHeader + "|   1  MIG 3g.20gb        9     0/2        19.50      No     42     2     0   |\n+----+\n",
			want: []LGIPRow{{GPU: 1, Name: "3g.20gb", ID: 9, Free: 0, Total: 2, MemoryGiB: 19.5, SMs: 42, DEC: 2, CE: -1, JPEG: -1, OFA: -1}},
		},
		"CRLF and P2P yes": {
			text: strings.ReplaceAll(lgipHeader+"|   0  MIG 7g.80gb        0     1/1        79.25      Yes    132    7     0   |\n|                                                             8     7     1   |\n", "\n", "\r\n"),
			want: []LGIPRow{{GPU: 0, Name: "7g.80gb", ID: 0, Free: 1, Total: 1, MemoryGiB: 79.25, P2P: true, SMs: 132, DEC: 7, CE: 8, JPEG: 7, OFA: 1}},
		},
		"memory not a number": {
			text:      lgipHeader + "|   0  MIG 1g.10gb       19     7/7        N/A        No     16     1     0   |\n",
			wantField: "lgip", wantMsg: `line 6 "|   0  MIG 1g.10gb       19     7/7        N/A        No     16     1     0   |": memory "N/A" is not a number of GiB`,
		},
		"free above total": {
			text:      "|   0  MIG 1g.10gb       19     8/7        9.75       No     16     1     0   |\n",
			wantField: "lgip", wantMsg: `instances "8/7": free exceeds total`,
		},
		"instances without slash": {
			text:      "|   0  MIG 1g.10gb       19     7          9.75       No     16     1     0   |\n",
			wantField: "lgip", wantMsg: `instances "7" is not free/total`,
		},
		"bad P2P": {
			text:      "|   0  MIG 1g.10gb       19     7/7        9.75       Maybe  16     1     0   |\n",
			wantField: "lgip", wantMsg: `P2P "Maybe" is neither Yes nor No`,
		},
		"bad GPU index": {
			text:      "|   x  MIG 1g.10gb       19     7/7        9.75       No     16     1     0   |\n",
			wantField: "lgip", wantMsg: `GPU "x" is not a non-negative integer`,
		},
		"missing column": {
			text:      "|   0  MIG 1g.10gb       19     7/7        9.75       No     16     1   |\n",
			wantField: "lgip", wantMsg: "a profile row has 10 columns",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rows, err := ParseLGIP(tc.text)
			checkErr(t, err, domain.CodeInvalidArgument, tc.wantField, tc.wantMsg)
			if !reflect.DeepEqual(rows, tc.want) {
				t.Errorf("rows = %+v, want %+v", rows, tc.want)
			}
		})
	}
}

// The slurmd -G fixture lists the MIG devices Slurm found by NVML on a node
// with two whole GPUs and two MIG GPUs: every MIG type must be a catalog
// profile, and the per-GPU share of them (one 4g.40gb and three 1g.10gb,
// assuming the two MIG GPUs are configured alike) must fit one GPU.
func TestSlurmdMIGTypesFitTheCatalog(t *testing.T) {
	for src, data := range fixtureSources(t, "slurmd-G_gres-autodetect_h100-80gb-mig_stackhpc.txt") {
		t.Run(src, func(t *testing.T) {
			types := regexp.MustCompile(`Type=nvidia_h100_80gb_hbm3_(\S+)`).FindAllStringSubmatch(string(data), -1)
			count := map[string]int{}
			for _, m := range types {
				if _, err := Lookup("H100-80GB", m[1]); err != nil {
					t.Errorf("slurm MIG type %s: %v", m[1], err)
				}
				count[m[1]]++
			}
			if want := map[string]int{"4g.40gb": 2, "1g.10gb": 6}; !reflect.DeepEqual(count, want) {
				t.Fatalf("MIG devices %v, want %v", count, want)
			}
			perGPU := append([]string{"4g.40gb"}, slices.Repeat([]string{"1g.10gb"}, count["1g.10gb"]/count["4g.40gb"])...)
			l, err := PlaceAll("H100-80GB", perGPU)
			if err != nil {
				t.Fatalf("PlaceAll(%v): %v", perGPU, err)
			}
			units := 0
			for _, x := range l.Instances {
				p, _ := Lookup(l.Model, x.Profile)
				units += p.GPUUnits()
			}
			if units != UnitsPerGPU {
				t.Errorf("the node's MIG GPU layout uses %d units, want a full GPU (%d)", units, UnitsPerGPU)
			}
		})
	}
}
