//go:build !linux

package main

import "syscall"

// childProcAttr: elsewhere the demo stops its redis-server on every exit
// path it controls.
func childProcAttr() *syscall.SysProcAttr { return nil }
