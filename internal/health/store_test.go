package health

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	dt "github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/telemetry"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// The attribution again, end to end through the ingest: SONiC switches
// (port names Ethernet0...) push vinted/sonic-exporter's exposition into
// a real telemetry.Store with its built-in sonic-exporter rules, twice a
// second apart. A pause storm on one uplink makes exactly the jobs whose
// rail-4 traffic crosses stripes congested; a counter reset on another
// job's port is not a spike.
func TestCongestedUplinkThroughSONiCExporter(t *testing.T) {
	w := dt.NewWorld(t, topology.GenerateOptions{Stripes: 2, ServersPerStripe: 2, GPUsPerServer: 8, NOS: "sonic"})
	w.Running(dt.MakeJob("acme/train", 0).Name("intra"), dt.On("s1-gpu001", 0, 1, 2, 3), dt.On("s1-gpu002", 0, 1, 2, 3)).
		Running(dt.MakeJob("acme/train", 0).Name("cross"), dt.On("s1-gpu001", 4, 5, 6, 7), dt.On("s2-gpu001", 4, 5, 6, 7)).
		Running(dt.MakeJob("glx/sim", 0).Name("rail0"), dt.On("s1-gpu002", 4), dt.On("s2-gpu002", 4))
	ix := Build(world{World: w}, nil)
	f := w.Topology.Sites[0].Fabrics[0]
	ports := map[string][]string{} // switch -> its ports in use
	for _, c := range f.Cables {
		ports[c.Leaf] = append(ports[c.Leaf], c.Port)
	}
	var hot, reset [2]string
	for _, u := range f.Uplinks {
		ports[u.Leaf] = append(ports[u.Leaf], u.LeafPort)
		ports[u.Spine] = append(ports[u.Spine], u.SpinePort)
		if u.Leaf == "s2-leaf4" && u.Spine == "spine2" {
			hot = [2]string{u.Leaf, u.LeafPort}
		}
	}
	for _, c := range f.Cables {
		if c.Server == "s1-gpu001" && c.NIC == "nic2" { // job 1's
			reset = [2]string{c.Leaf, c.Port}
		}
	}
	cfg, err := telemetry.ParseConfig([]byte("push:\n- {name: sonic, rules: sonic-exporter}\n"))
	if err != nil {
		t.Fatal(err)
	}
	clock := tstime.NewFake(dt.Now)
	st, err := telemetry.NewStore(cfg, clock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		for sw, ps := range ports {
			var b strings.Builder
			b.WriteString("# TYPE sonic_interface_receive_errs counter\n# TYPE sonic_interface_receive_bytes counter\n")
			for _, p := range ps {
				pause, bytes := 1000.0+float64(round)*10, 1e9+float64(round)*4e9
				switch [2]string{sw, p} {
				case hot:
					pause += float64(round) * 50000
				case reset:
					pause, bytes = 1e9-float64(round)*(1e9-5), 1e12-float64(round)*(1e12-100) // the switch restarted
				}
				fmt.Fprintf(&b, "sonic_interface_receive_errs{device=%q,type=\"pause\"} %g\n", p, pause)
				fmt.Fprintf(&b, "sonic_interface_receive_errs{device=%q,type=\"error\"} 0\n", p)
				fmt.Fprintf(&b, "sonic_interface_receive_bytes{device=%q} %g\n", p, bytes)
			}
			if _, err := st.PushWith("sonic", telemetry.PushOptions{Device: sw}, strings.NewReader(b.String()), "text/plain; version=0.0.4"); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(time.Second)
	}
	th := DefaultThresholds()
	var congested []uint64
	for _, id := range ix.Jobs() {
		v, _ := ix.Judge(id, st, &th)
		switch v.Verdict {
		case domain.PathCongested:
			congested = append(congested, id)
			if !strings.Contains(v.Message, hot[0]+"/"+hot[1]) {
				t.Errorf("job %d: %q does not name %v", id, v.Message, hot)
			}
		case domain.PathHealthy:
		default:
			t.Errorf("job %d: %s %s, want congested or healthy", id, v.Verdict, v.Message)
		}
	}
	if !slices.Equal(congested, []uint64{2, 3}) {
		t.Fatalf("congested jobs %v, want 2 and 3 (their rail-4 traffic crosses stripes)", congested)
	}
	hs := ix.Hotspots(st, &th, All, false, 0, dt.Now)
	if len(hs.Ports) != 1 || !strings.HasPrefix(hs.Ports[0].Port, hot[0]+"/"+hot[1]) || len(hs.Ports[0].Jobs) != 2 {
		t.Fatalf("hotspots %+v, want the hot uplink with jobs 2 and 3", hs.Ports)
	}
}
