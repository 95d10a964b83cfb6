package devcluster

import "syscall"

// procAttr puts a member in a process group of its own (a terminal's ^C
// reaches the benchmark, which stops the members in order) and has the
// kernel kill it if the process that started it dies without Close.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
