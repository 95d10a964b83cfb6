package lab

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Endpoint finds an endpoint by server/nic, or by one of its addresses
// (with or without a prefix length).
func (l *Lab) Endpoint(spec string) (*Endpoint, error) {
	for i := range l.Endpoints {
		if l.Endpoints[i].Name() == spec {
			return &l.Endpoints[i], nil
		}
	}
	a, err := netip.ParseAddr(strings.Split(spec, "/")[0])
	if err == nil {
		for i := range l.Endpoints {
			e := &l.Endpoints[i]
			for _, p := range []string{e.IPv4, e.IPv6} {
				if pp, err := netip.ParsePrefix(p); err == nil && pp.Addr() == a {
					return e, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("%q is not an endpoint of the lab (server/nic, e.g. %s, or one of its addresses)", spec, l.Endpoints[0].Name())
}

// Ping sends one echo request from src's namespace to dst (an address)
// and reports whether a reply came within timeout, with ping's output.
func (l *Lab) Ping(ctx context.Context, src *Endpoint, dst string, timeout time.Duration) (bool, string) {
	secs := strconv.FormatFloat(timeout.Seconds(), 'f', 2, 64)
	args := []string{"netns", "exec", src.Netns, "ping", "-n", "-q", "-c", "1", "-W", secs}
	if a, err := netip.ParseAddr(dst); err == nil && a.Is6() {
		args = append(args, "-6")
	}
	out, err := exec.CommandContext(ctx, "ip", append(args, dst)...).CombinedOutput()
	return err == nil, strings.TrimSpace(string(out))
}

// Pair is an ordered pair of endpoints (by Name).
type Pair struct{ From, To string }

// Reach pings every ordered pair of endpoints over IPv4, in parallel, and
// returns which pairs got a reply within timeout.
func (l *Lab) Reach(ctx context.Context, eps []Endpoint, timeout time.Duration) map[Pair]bool {
	out := map[Pair]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range eps {
		for j := range eps {
			if i == j {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				ok, _ := l.Ping(ctx, &eps[i], eps[j].Addr4(), timeout)
				mu.Lock()
				out[Pair{eps[i].Name(), eps[j].Name()}] = ok
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return out
}

// FirstReply pings dst from src every interval until the first reply or
// the deadline, and returns when the reply came (ping -D timestamps).
// Errors (unreachable) do not stop it: a port that joins its VRF later
// answers later.
func (l *Lab) FirstReply(ctx context.Context, src *Endpoint, dst string, interval, deadline time.Duration) (time.Time, error) {
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	// No -w: with a deadline, ping stops at the first error (an
	// unreachable destination); the context ends it instead.
	cmd := exec.CommandContext(cctx, "ip", "netns", "exec", src.Netns, "ping", "-n", "-D",
		"-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), dst)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return time.Time{}, err
	}
	if err := cmd.Start(); err != nil {
		return time.Time{}, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	last := ""
	for sc.Scan() {
		line := sc.Text()
		last = line
		if at, ok := replyTime(line); ok {
			return at, nil
		}
	}
	return time.Time{}, fmt.Errorf("ping %s from %s: no reply within %s (%s)", dst, src.Name(), deadline, last)
}

// PingRun is a continuous ping (`ping -D -i INTERVAL`) whose replies are
// timestamped as they come.
type PingRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	times  []time.Time
	last   string
}

// StartPing pings dst from src every interval until Stop. Errors
// (unreachable, filtered) do not stop it.
func (l *Lab) StartPing(ctx context.Context, src *Endpoint, dst string, interval time.Duration) (*PingRun, error) {
	cctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, "ip", "netns", "exec", src.Netns, "ping", "-n", "-D",
		"-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), dst)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	p := &PingRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cmd.Wait()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			at, ok := replyTime(line)
			p.mu.Lock()
			p.last = line
			if ok {
				p.times = append(p.times, at)
			}
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// Replies returns the reply times so far.
func (p *PingRun) Replies() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.times...)
}

// Stop ends the ping and returns every reply time.
func (p *PingRun) Stop() []time.Time {
	p.cancel()
	<-p.done
	return p.Replies()
}

// replyTime reads the timestamp of a reply line of `ping -D`:
// "[1795336473.123456] 64 bytes from 10.0.0.7: icmp_seq=...".
func replyTime(line string) (time.Time, bool) {
	if !strings.Contains(line, "bytes from") || !strings.HasPrefix(line, "[") {
		return time.Time{}, false
	}
	ts, _, _ := strings.Cut(strings.TrimPrefix(line, "["), "]")
	sec, frac, _ := strings.Cut(ts, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	return time.Unix(s, us*1000), true
}
