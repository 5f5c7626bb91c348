//go:build !unix

package main

import "log/slog"

// capConnections returns max: this platform has no RLIMIT_NOFILE to fit.
func capConnections(configured int, _ *slog.Logger) int { return configured }
