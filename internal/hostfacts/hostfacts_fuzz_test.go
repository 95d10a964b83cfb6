package hostfacts_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// The fuzz targets below feed every host-facts parser arbitrary text. Each
// asserts more than "no panic": a refusal is an invalid_argument
// *domain.Error naming the element and the command it came from, with no
// partial result; an accepted input yields values that make sense (no
// negative indices, counts or sizes, matrices that are square and
// symmetric, identifiers with their prefixes); parsing is deterministic;
// and the result is no larger than the input (bounded work). Seeds: every
// recorded output under testdata (f.Add) and the shapes that once broke a
// parser (testdata/fuzz/FuzzXxx, committed).

// seedFiles adds the recorded outputs whose names contain any of subs.
func seedFiles(f *testing.F, subs ...string) {
	f.Helper()
	n := 0
	err := filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"fuzz"+string(filepath.Separator)) {
			return err
		}
		for _, s := range subs {
			if strings.Contains(filepath.Base(p), s) {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				f.Add(string(b))
				n++
				break
			}
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	if n == 0 {
		f.Fatalf("no seed file under testdata matches %q", subs)
	}
}

// checkRefusal asserts that a parser's error is a proper refusal.
func checkRefusal(t *testing.T, source string, err error, result any) {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("error is %T (%v), want *domain.Error", err, err)
	}
	if de.Code != domain.CodeInvalidArgument {
		t.Fatalf("error code %s, want invalid_argument: %v", de.Code, err)
	}
	if de.Field == "" {
		t.Fatalf("error names no element: %v", err)
	}
	if !strings.HasPrefix(de.Message, source+": ") {
		t.Fatalf("error %q does not name its source %q", de.Message, source)
	}
	if v := reflect.ValueOf(result); v.IsValid() && !v.IsNil() {
		t.Fatalf("refused input returned a result too: %+v", result)
	}
}

// parseTwice runs parse twice and asserts the results agree.
func parseTwice[T any](t *testing.T, in string, parse func(string) (T, error)) (T, error) {
	t.Helper()
	a, errA := parse(in)
	b, errB := parse(in)
	if (errA == nil) != (errB == nil) || !reflect.DeepEqual(a, b) {
		t.Fatalf("parse is not deterministic: %+v (%v) then %+v (%v)", a, errA, b, errB)
	}
	return a, errA
}

// nonEmptyLines bounds how many records a line-oriented input can hold.
func nonEmptyLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

func FuzzParseList(f *testing.F) {
	seedFiles(f, "nvidia-smi-L")
	f.Fuzz(func(t *testing.T, in string) {
		gpus, err := parseTwice(t, in, hostfacts.ParseList)
		if err != nil {
			checkRefusal(t, "nvidia-smi -L", err, gpus)
			return
		}
		records := 0
		for _, g := range gpus {
			records += 1 + len(g.MIG)
			if g.Index < 0 || !strings.HasPrefix(g.UUID, "GPU-") {
				t.Fatalf("accepted GPU %+v: index must be >= 0, uuid must start with GPU-", g)
			}
			for _, m := range g.MIG {
				if m.Device < 0 || m.Profile == "" || !strings.HasPrefix(m.UUID, "MIG-") {
					t.Fatalf("accepted MIG device %+v of GPU %d", m, g.Index)
				}
			}
		}
		if records > nonEmptyLines(in) {
			t.Fatalf("%d records from %d lines", records, nonEmptyLines(in))
		}
	})
}

func FuzzParseLGI(f *testing.F) {
	seedFiles(f, "mig-lgi")
	f.Fuzz(func(t *testing.T, in string) {
		gis, err := parseTwice(t, in, hostfacts.ParseLGI)
		if err != nil {
			checkRefusal(t, "nvidia-smi mig -lgi", err, gis)
			return
		}
		for _, g := range gis {
			if g.GPU < 0 || g.ProfileID < 0 || g.ID < 0 || g.Start < 0 || g.Size < 1 || g.Profile == "" {
				t.Fatalf("accepted GPU instance %+v: indices must be >= 0, size >= 1", g)
			}
		}
		if len(gis) > nonEmptyLines(in) {
			t.Fatalf("%d instances from %d lines", len(gis), nonEmptyLines(in))
		}
	})
}

func FuzzParseMIGMinors(f *testing.F) {
	seedFiles(f, "mig-minors")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := parseTwice(t, in, hostfacts.ParseMIGMinors)
		if err != nil {
			checkRefusal(t, "mig-minors", err, m)
			return
		}
		for p, minor := range m {
			if p == "" || strings.ContainsAny(p, " \t\n") || minor < 0 {
				t.Fatalf("accepted %q -> %d", p, minor)
			}
		}
		if len(m) > nonEmptyLines(in) {
			t.Fatalf("%d entries from %d lines", len(m), nonEmptyLines(in))
		}
	})
}

func FuzzParseNVLinkStatus(f *testing.F) {
	seedFiles(f, "nvlink-status")
	f.Fuzz(func(t *testing.T, in string) {
		st, err := parseTwice(t, in, hostfacts.ParseNVLinkStatus)
		if err != nil {
			checkRefusal(t, "nvidia-smi nvlink --status", err, st)
			return
		}
		links := 0
		for _, g := range st {
			if g.Index < 0 || g.Up < 0 || g.Down < 0 {
				t.Fatalf("accepted %+v", g)
			}
			links += 1 + g.Up + g.Down
		}
		if links > nonEmptyLines(in) {
			t.Fatalf("%d GPUs and links from %d lines", links, nonEmptyLines(in))
		}
	})
}

func FuzzParseIBStat(f *testing.F) {
	seedFiles(f, "ibstat")
	f.Fuzz(func(t *testing.T, in string) {
		ports, err := parseTwice(t, in, hostfacts.ParseIBStat)
		if err != nil {
			checkRefusal(t, "ibstat", err, ports)
			return
		}
		for _, p := range ports {
			if p.Device == "" || p.Port < 0 || p.RateGbps < 0 {
				t.Fatalf("accepted port %+v: a device name, port >= 0 and rate >= 0 are required", p)
			}
		}
		if len(ports) > nonEmptyLines(in) {
			t.Fatalf("%d ports from %d lines", len(ports), nonEmptyLines(in))
		}
	})
}

// checkQuery asserts what every accepted nvidia-smi -q result must hold.
func checkQuery(t *testing.T, q *hostfacts.Query, inputLen int) {
	t.Helper()
	if q.Driver == "" {
		t.Fatal("accepted a query without a driver version")
	}
	items := 0
	for i, g := range q.GPUs {
		items += 1 + len(g.MIG)
		if g.Index != i || !strings.HasPrefix(g.UUID, "GPU-") || g.PCIBusID == "" || g.MemoryMiB < 0 || g.Minor < -1 {
			t.Fatalf("accepted GPU %d: %+v", i, g)
		}
		switch g.MIGMode {
		case "", "Enabled", "Disabled":
		default:
			t.Fatalf("GPU %d: MIG mode %q", i, g.MIGMode)
		}
		for _, m := range g.MIG {
			if m.Index < 0 || m.GI < -1 || m.CI < -1 || m.MemoryMiB < 0 || m.SMs < 0 {
				t.Fatalf("accepted MIG device of GPU %d: %+v", i, m)
			}
		}
	}
	if items > inputLen {
		t.Fatalf("%d GPUs and MIG devices from %d bytes", items, inputLen)
	}
}

func FuzzParseQueryXML(f *testing.F) {
	seedFiles(f, "nvidia-smi-q-x")
	f.Fuzz(func(t *testing.T, in string) {
		q, err := parseTwice(t, in, func(s string) (*hostfacts.Query, error) { return hostfacts.ParseQueryXML([]byte(s)) })
		if err != nil {
			checkRefusal(t, "nvidia-smi -q -x", err, q)
			return
		}
		checkQuery(t, q, len(in))
	})
}

func FuzzParseQueryText(f *testing.F) {
	seedFiles(f, "nvidia-smi-q_text", "nvidia-smi-q.txt")
	f.Fuzz(func(t *testing.T, in string) {
		q, err := parseTwice(t, in, hostfacts.ParseQueryText)
		if err != nil {
			checkRefusal(t, "nvidia-smi -q", err, q)
			return
		}
		checkQuery(t, q, len(in))
	})
}

// connection is a cell of nvidia-smi topo -m.
var connection = regexp.MustCompile(`^(X|NV[0-9]+|PIX|PXB|PHB|NODE|SOC|SYS)$`)

func FuzzParseTopo(f *testing.F) {
	seedFiles(f, "topo-m")
	f.Fuzz(func(t *testing.T, in string) {
		topo, err := parseTwice(t, in, hostfacts.ParseTopo)
		if err != nil {
			checkRefusal(t, "nvidia-smi topo -m", err, topo)
			return
		}
		if topo.GPUs < 1 {
			t.Fatalf("accepted a matrix of %d GPUs", topo.GPUs)
		}
		if len(topo.CPUAffinity) != topo.GPUs || len(topo.NUMAAffinity) != topo.GPUs {
			t.Fatalf("affinity for %d and %d GPUs, want %d", len(topo.CPUAffinity), len(topo.NUMAAffinity), topo.GPUs)
		}
		if n := topo.GPUs + len(topo.NICs); n*n > len(in) {
			t.Fatalf("%dx%d matrix from %d bytes", n, n, len(in))
		}
		seen := map[string]bool{}
		for n, name := range topo.NICs {
			if name == "" || seen[name] {
				t.Fatalf("NIC column %d is %q: names must be present and unique (%v)", n, name, topo.NICs)
			}
			seen[name] = true
			if g, conn := topo.ClosestGPU(n); (g < 0) != (conn == "") || g >= topo.GPUs {
				t.Fatalf("NIC %d: closest GPU %d %q", n, g, conn)
			}
			for g := 0; g < topo.GPUs; g++ {
				if c := topo.GPUNIC(g, n); !connection.MatchString(c) || c == "X" {
					t.Fatalf("GPU %d to NIC %d: %q is not a connection type", g, n, c)
				}
			}
			if numa := topo.NICNUMA(n); numa < -1 {
				t.Fatalf("NIC %d: NUMA %d", n, numa)
			}
		}
		for g, numa := range topo.NUMAAffinity {
			if numa < -1 {
				t.Fatalf("GPU %d: NUMA affinity %d", g, numa)
			}
		}
		// NVLink groups partition the GPUs, and agree with NVLinks.
		in2 := make([]int, topo.GPUs)
		for _, grp := range topo.NVLinkGroups() {
			for _, g := range grp {
				in2[g]++
			}
		}
		for g, c := range in2 {
			if c != 1 {
				t.Fatalf("GPU %d is in %d NVLink groups", g, c)
			}
		}
		for a := 0; a < topo.GPUs; a++ {
			for b := 0; b < topo.GPUs; b++ {
				if l := topo.NVLinks(a, b); l < 0 || l != topo.NVLinks(b, a) || (a == b && l != 0) {
					t.Fatalf("NVLinks(%d,%d) = %d, NVLinks(%d,%d) = %d", a, b, l, b, a, topo.NVLinks(b, a))
				}
			}
		}
	})
}
