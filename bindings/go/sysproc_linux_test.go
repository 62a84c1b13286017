package bloomguard

import "syscall"

// diesWithTest: a server the tests start must not outlive the test binary if it dies without
// running the cleanup (Linux: the parent-death signal).
func diesWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
