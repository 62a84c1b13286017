//go:build !linux

package bloomguard

import "syscall"

// diesWithTest: no parent-death signal off Linux; the tests' cleanups stop their servers.
func diesWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
