package main

import "syscall"

// childProcAttr puts the private redis-server in its own process group, so
// Ctrl-C reaches only the demo, which then shuts the pool down and stops
// the server itself; and kills the server if the demo dies without that.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
