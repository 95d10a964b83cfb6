package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
)

// members is the cluster a run submits to, in this process or as
// processes of their own: what the run needs of either.
type members struct {
	urls       []string
	pids       []int // each member's process (all this one in-process)
	token      string
	waitLeader func(context.Context) (int, error)
	close      func() error
}

// startMembers starts o.Servers members under dir, as o.Processes says.
func startMembers(ctx context.Context, dir string, o SubmitOptions) (*members, error) {
	if o.Processes {
		p, err := devcluster.StartProcs(ctx, dir, o.Servers, devcluster.ProcOptions{Binary: o.Binary, LogStore: o.LogStore})
		if err != nil {
			return nil, err
		}
		return &members{urls: p.URLs, pids: p.PIDs, token: p.AdminToken, waitLeader: p.WaitLeader, close: p.Close}, nil
	}
	c, err := devcluster.Start(ctx, dir, o.Servers, devcluster.Options{LogStore: o.LogStore})
	if err != nil {
		return nil, err
	}
	m := &members{token: c.AdminToken, waitLeader: c.WaitLeader, close: c.Close}
	for _, s := range c.Servers {
		m.urls, m.pids = append(m.urls, s.URL()), append(m.pids, os.Getpid())
	}
	return m, nil
}

// client is an admin client of member i.
func (m *members) client(i int) *client.Client {
	cl, err := client.New(m.urls[i], m.token, nil)
	if err != nil {
		panic(err) // URLs come from running servers: cannot be malformed
	}
	return cl
}

// fetchProfile copies a server's /debug/pprof/<kind>?seconds=secs (a CPU
// profile, the allocations or an execution trace of the next secs seconds)
// into w.
func fetchProfile(ctx context.Context, url, token, kind string, secs int, w io.Writer) error {
	u := fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", url, kind, secs)
	if secs == 0 { // kind carries its own query, or none
		u = fmt.Sprintf("%s/debug/pprof/%s", url, kind)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("leader's %s: %w", kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("leader's %s: %s: %s", kind, resp.Status, strings.TrimSpace(string(b)))
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("leader's %s: %w", kind, err)
	}
	return nil
}

// procRSS reads a process's resident set now and at its peak from /proc
// (Linux; 0, 0 elsewhere or when it cannot be read).
func procRSS(pid int) (now, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			now = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return now, peak
}
