package lab_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jobfabric/jobfabric/internal/lab"
)

// exporter is one switch's Prometheus endpoint in the lab: Debian's
// prometheus-node-exporter running inside the switch's namespace and
// inside each of its VRF namespaces, and an HTTP front in the test's
// namespace that merges their answers into one exposition.
//
// Why the merge: the kernel here has no VRF devices, so the lab's driver
// makes each VRF a namespace and moves the VRF's server ports into it
// (labdeploy). On a real Linux switch the VRFs are devices of one
// namespace and one node_exporter sees every port; the front gives the
// scraper that same view, with the exporters' real counters. It also
// stands in for a management network: nothing routes out of the lab.
type exporter struct {
	device string
	netns  string
	url    string // the front's /metrics
	bin    string
	srv    *http.Server
	ln     net.Listener

	mu    sync.Mutex
	procs map[string]*exec.Cmd // namespace -> its node_exporter
}

// exporterPort is where every node_exporter listens inside its namespace.
const exporterPort = "127.0.0.1:9100"

// startExporter starts the exporters of dev and their front, or skips
// the test where node_exporter is missing.
func startExporter(t *testing.T, dev *lab.Device) *exporter {
	t.Helper()
	bin, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		if bin, err = exec.LookPath("node_exporter"); err != nil {
			t.Skip("skipping: Debian's prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter)")
		}
	}
	x := &exporter{device: dev.Name, netns: dev.Netns, bin: bin, procs: map[string]*exec.Cmd{}}
	if x.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	x.url = "http://" + x.ln.Addr().String() + "/metrics"
	x.srv = &http.Server{Handler: http.HandlerFunc(x.serve), ReadHeaderTimeout: 5 * time.Second}
	go x.srv.Serve(x.ln)
	t.Cleanup(x.stop)
	// Wait until the switch's own exporter answers through the front.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := x.scrape(context.Background(), x.netns); err == nil {
			return x
		} else if time.Now().After(deadline) {
			t.Fatalf("node_exporter in %s does not answer: %v", x.netns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// namespaces lists the switch's namespace and its VRF namespaces now.
func (x *exporter) namespaces() []string {
	out := []string{x.netns}
	entries, _ := os.ReadDir("/run/netns")
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), x.netns+".vrf-") {
			out = append(out, en.Name())
		}
	}
	return out
}

// scrape reads the node_exporter of one namespace, starting it on first
// use.
func (x *exporter) scrape(ctx context.Context, ns string) (map[string]*dto.MetricFamily, error) {
	x.mu.Lock()
	if x.procs[ns] == nil {
		cmd := exec.Command("ip", "netns", "exec", ns, x.bin,
			"--collector.disable-defaults", "--collector.netdev", "--collector.netclass",
			"--web.listen-address="+exporterPort)
		if err := cmd.Start(); err != nil {
			x.mu.Unlock()
			return nil, fmt.Errorf("start node_exporter in %s: %w", ns, err)
		}
		x.procs[ns] = cmd
	}
	x.mu.Unlock()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := lab.InNetns(ns, func() error {
				var err error
				c, err = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+exporterPort+"/metrics", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node_exporter in %s: %s", ns, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// serve answers one scrape: every namespace's families, merged (a series
// seen twice keeps its first sample; a namespace whose exporter is still
// starting is left out of this answer).
func (x *exporter) serve(w http.ResponseWriter, r *http.Request) {
	merged := map[string]*dto.MetricFamily{}
	seen := map[string]bool{}
	for _, ns := range x.namespaces() {
		fams, err := x.scrape(r.Context(), ns)
		if err != nil {
			continue
		}
		for name, f := range fams {
			m := merged[name]
			if m == nil {
				m = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type}
				merged[name] = m
			}
			for _, s := range f.Metric {
				var id strings.Builder
				id.WriteString(name)
				for _, l := range s.Label {
					id.WriteString("," + l.GetName() + "=" + l.GetValue())
				}
				if !seen[id.String()] {
					seen[id.String()] = true
					m.Metric = append(m.Metric, s)
				}
			}
		}
	}
	names := make([]string, 0, len(merged))
	for n := range merged {
		names = append(names, n)
	}
	sort.Strings(names)
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	enc := expfmt.NewEncoder(w, format)
	for _, n := range names {
		enc.Encode(merged[n])
	}
}

func (x *exporter) stop() {
	x.srv.Close()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ns := range slices.Sorted(maps.Keys(x.procs)) {
		x.procs[ns].Process.Kill()
		x.procs[ns].Wait()
	}
}

// String names the exporter for logs.
func (x *exporter) String() string { return fmt.Sprintf("%s at %s", x.device, x.url) }
