package doctest

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// defaultPort is the CLI's and the server's default API port.
const defaultPort = "7070"

var (
	portRe       = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):(\d{2,5})\b`)
	tmpRe        = regexp.MustCompile(`(^|[\s='"(:])/tmp/`)
	labDirRe     = regexp.MustCompile(`/run/jobfabric-lab\b`)
	sudoRe       = regexp.MustCompile(`(^|[;&|(]\s*)sudo\s+`)
	serverCmdRe  = regexp.MustCompile(`\bjobfabric\s+server\b`)
	backgroundRe = regexp.MustCompile(`[^&]&\s*(#.*)?$`)
	goBuildRe    = regexp.MustCompile(`^go\s+build\b`)
)

// rewriter changes only what a page's command must not take literally on a
// shared test machine: its ports, /tmp/ paths and lab directory, sudo as
// root.
type rewriter struct {
	tmp   string            // the session's /tmp/
	lab   string            // the session's lab directory, for /run/jobfabric-lab
	root  bool              // drop sudo
	ports map[string]string // page port -> free port
	alloc func() (int, error)
}

// port maps a page's port to a free one, the same each time.
func (r *rewriter) port(p string) (string, error) {
	if q, ok := r.ports[p]; ok {
		return q, nil
	}
	n, err := r.alloc()
	if err != nil {
		return "", err
	}
	q := strconv.Itoa(n)
	r.ports[p] = q
	return q, nil
}

func (r *rewriter) rewrite(cmd string) (string, error) {
	var err error
	out := portRe.ReplaceAllStringFunc(cmd, func(m string) string {
		sub := portRe.FindStringSubmatch(m)
		q, perr := r.port(sub[2])
		if perr != nil {
			err = perr
			return m
		}
		return sub[1] + ":" + q
	})
	if err != nil {
		return "", err
	}
	if serverCmdRe.MatchString(out) && !strings.Contains(out, "--listen") {
		q, err := r.port(defaultPort)
		if err != nil {
			return "", err
		}
		out = serverCmdRe.ReplaceAllString(out, "${0} --listen 127.0.0.1:"+q)
	}
	out = tmpRe.ReplaceAllString(out, "${1}"+r.tmp+"/")
	if r.lab != "" {
		out = labDirRe.ReplaceAllLiteralString(out, r.lab)
	}
	if r.root {
		out = sudoRe.ReplaceAllString(out, "${1}")
	}
	return out, nil
}

// background says whether a command runs in the background (ends in &).
func background(cmd string) bool { return backgroundRe.MatchString(" " + cmd) }

// freePort returns a loopback port that is free now, and whose port + 1000
// is free too: a server's raft port defaults to its API port + 1000.
func freePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p+1000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1000))
		l.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port pair (P, P+1000) found")
}
