//go:build unix

package main

import (
	"log/slog"
	"syscall"
)

// capConnections lowers max, the cap on client connections, to what the process's file
// descriptor limit allows: each connection with a request in flight also holds one to a
// backend, and some descriptors go to listeners, scrapes and logs.
func capConnections(configured int, log *slog.Logger) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return configured
	}
	const reserve = 256
	allowed := int((lim.Cur - min(lim.Cur, reserve)) / 2)
	if allowed >= configured {
		return configured
	}
	allowed = max(allowed, 1)
	log.Warn("server.max_connections lowered to fit the file descriptor limit", "configured", configured, "allowed", allowed, "nofile", lim.Cur)
	return allowed
}
