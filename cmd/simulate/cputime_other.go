//go:build !unix

package main

import "time"

// processStart stands in for CPU accounting where getrusage is missing: the probe runs one
// simulation at a time, so its wall time is close to its CPU time.
var processStart = time.Now()

// processCPU is the wall time since the process started.
func processCPU() time.Duration { return time.Since(processStart) }
