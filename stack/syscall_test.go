package stack_test

import "syscall"

const (
	syscallEMSGSIZE   = syscall.EMSGSIZE
	syscallEADDRINUSE = syscall.EADDRINUSE
)
