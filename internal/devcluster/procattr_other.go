//go:build !linux

package devcluster

import "syscall"

// procAttr: elsewhere than Linux there is no parent-death signal; Close (or
// the context's end) is what stops the members.
func procAttr() *syscall.SysProcAttr { return nil }
