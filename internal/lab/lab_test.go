package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/topology"
)

func TestTopologyChecks(t *testing.T) {
	gen := func(nos string, stripes int) string {
		topo, err := topology.Generate(topology.GenerateOptions{Stripes: stripes, ServersPerStripe: 4, GPUsPerServer: 2, Spines: 2, NOS: nos})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := yaml.Marshal(topo)
		p := filepath.Join(t.TempDir(), "lab.yaml")
		os.WriteFile(p, b, 0o644)
		return p
	}
	if _, err := loadTopology(Options{Topology: gen("frr", 2)}); err != nil {
		t.Fatalf("the test lab's topology: %v", err)
	}
	for name, tc := range map[string]struct {
		o    Options
		want string
	}{
		"no file":   {Options{}, "topology file is required"},
		"missing":   {Options{Topology: "/nonexistent/lab.yaml"}, "cannot read"},
		"sonic":     {Options{Topology: gen("sonic", 1)}, "runs FRR only"},
		"too large": {Options{Topology: gen("frr", 20)}, "a lab holds at most"},
	} {
		if _, err := loadTopology(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// A second lab in a state directory that has one is refused before
// anything is built, naming the lab that is up.
func TestSecondUpRefused(t *testing.T) {
	dir := t.TempDir()
	cur := &Lab{Prefix: "jflabcdef-", RunDir: filepath.Join(dir, "jflabcdef"), Dir: dir, Created: time.Now()}
	if err := cur.save(); err != nil {
		t.Fatal(err)
	}
	topo, _ := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1, NOS: "frr"})
	_, err := Up(context.Background(), Options{Parsed: topo, Dir: dir})
	var exists *ExistsError
	if !errors.As(err, &exists) || !strings.Contains(err.Error(), "jflabcdef-") || !strings.Contains(err.Error(), "lab down") {
		t.Fatalf("second up: %v, want an ExistsError naming jflabcdef- and lab down", err)
	}
	if l, err := Load(dir); err != nil || l.Prefix != cur.Prefix {
		t.Fatalf("the first lab's state was touched: %+v %v", l, err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no lab is up") {
		t.Fatalf("load without a lab: %v", err)
	}
}

func TestEndpointLookup(t *testing.T) {
	l := &Lab{Endpoints: []Endpoint{
		{Server: "s1-gpu001", NIC: "nic0", IPv4: "10.0.0.1/31", IPv6: "fd00:0:0:1::1/127"},
		{Server: "s1-gpu002", NIC: "nic1", IPv4: "10.0.0.7/31"},
	}}
	for spec, want := range map[string]string{
		"s1-gpu002/nic1":    "s1-gpu002/nic1",
		"10.0.0.1":          "s1-gpu001/nic0",
		"10.0.0.7/31":       "s1-gpu002/nic1",
		"fd00:0:0:1::1":     "s1-gpu001/nic0",
		"fd00:0:0:1::1/127": "s1-gpu001/nic0",
	} {
		if e, err := l.Endpoint(spec); err != nil || e.Name() != want {
			t.Errorf("%s: %v %v, want %s", spec, e, err, want)
		}
	}
	if _, err := l.Endpoint("10.0.0.0"); err == nil || !strings.Contains(err.Error(), "server/nic") {
		t.Fatalf("a leaf address resolved: %v", err)
	}
}

func TestDownRefusesForeignPrefixes(t *testing.T) {
	for _, p := range []string{"", "j", "evl-", "netns"} {
		if err := (&Lab{Prefix: p, Dir: t.TempDir()}).Down(context.Background()); err == nil {
			t.Errorf("down with prefix %q: no error", p)
		}
	}
}

func TestLabDirMustBeTraversable(t *testing.T) {
	private := filepath.Join(t.TempDir(), "private")
	os.Mkdir(private, 0o700)
	topo, _ := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 2, Spines: 1, NOS: "frr"})
	if _, err := Up(context.Background(), Options{Parsed: topo, Dir: private}); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("up in a 0700 directory: %v", err)
	}
}
