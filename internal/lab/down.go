package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Down stops the lab's daemons by PID (pid files and the mount namespace
// holders, each checked to live in one of the lab's namespaces), deletes
// every namespace whose name starts with the lab's prefix, and removes the
// run directory and the state file. It is safe to call on a lab that is
// half built or half removed.
func (l *Lab) Down(ctx context.Context) error {
	var errs []error
	if !strings.HasPrefix(l.Prefix, "jfl") || len(l.Prefix) < 5 {
		return fmt.Errorf("lab prefix %q is not one the lab makes: refusing to delete namespaces by it", l.Prefix)
	}
	ours := l.netnsInodes()
	host := netnsOf(os.Getpid())
	// A process is the lab's if it runs in one of the lab's switch
	// namespaces, or (namespaces already gone) names the run directory
	// (the daemons' pid files), or is a holder still sleeping outside the
	// host's namespace.
	isOurs := func(pid int, holder bool) bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmd := string(b)
		switch {
		case pid <= 1:
			return false
		case ours[netnsOf(pid)]:
			return true
		case l.RunDir != "" && strings.Contains(cmd, l.RunDir+"/"):
			return true
		}
		return holder && cmd == "sleep\x00infinity\x00" && netnsOf(pid) != host
	}
	var pids []int
	holders := map[int]bool{}
	for _, d := range l.Devices {
		for _, daemon := range []string{"bgpd", "zebra"} {
			b, err := os.ReadFile(filepath.Join(d.Dir, daemon+".pid"))
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pids = append(pids, pid)
			}
		}
		if d.HolderPID > 0 {
			pids = append(pids, d.HolderPID)
			holders[d.HolderPID] = true
		}
	}
	var live []int
	for _, pid := range pids {
		if isOurs(pid, holders[pid]) {
			if err := syscall.Kill(pid, syscall.SIGTERM); err == nil {
				live = append(live, pid)
			}
		}
	}
	if err := waitFor(ctx, 3*time.Second, func() bool { return !anyAlive(live) }); err != nil {
		for _, pid := range live {
			if alive(pid) && isOurs(pid, holders[pid]) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		waitFor(ctx, 2*time.Second, func() bool { return !anyAlive(live) })
	}
	names, err := l.namespaces()
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range names {
		if err := sh(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if l.RunDir != "" && strings.HasPrefix(filepath.Base(l.RunDir), "jfl") {
		if err := os.RemoveAll(l.RunDir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.Remove(stateFile(l.Dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// namespaces lists the host's named namespaces of the lab.
func (l *Lab) namespaces() ([]string, error) {
	entries, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), l.Prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// netnsInodes are the inodes of the lab's switch namespaces (where its
// daemons and holders run).
func (l *Lab) netnsInodes() map[uint64]bool {
	out := map[uint64]bool{}
	for _, d := range l.Devices {
		var st syscall.Stat_t
		if syscall.Stat("/run/netns/"+d.Netns, &st) == nil {
			out[st.Ino] = true
		}
	}
	return out
}

// netnsOf is the inode of a process's network namespace (0 if unknown).
func netnsOf(pid int) uint64 {
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return 0
	}
	// "net:[4026532281]"
	s := strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]")
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

func anyAlive(pids []int) bool {
	for _, p := range pids {
		if alive(p) {
			return true
		}
	}
	return false
}
