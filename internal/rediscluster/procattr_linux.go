package rediscluster

import "syscall"

// sysProcAttr kills a node when the process that started it dies, even by
// SIGKILL, so a crashed test or bench leaves no redis-server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
