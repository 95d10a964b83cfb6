package raftinject

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ListeningPorts returns the TCP ports this process listens on (IPv4 and
// IPv6), from /proc: the attack surface a test of an in-process server
// can aim at. Linux only.
func ListeningPorts() (map[int]bool, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("raftinject: list file descriptors: %w", err)
	}
	mine := map[string]bool{} // socket inodes
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		fh, err := os.Open(f)
		if os.IsNotExist(err) {
			continue // no IPv6
		}
		if err != nil {
			return nil, fmt.Errorf("raftinject: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) < 10 || f[3] != "0A" || !mine[f[9]] { // 0A: LISTEN
				continue
			}
			_, port, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(port, 16, 32); err == nil {
				ports[int(p)] = true
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("raftinject: read %s: %w", f, err)
		}
	}
	return ports, nil
}
