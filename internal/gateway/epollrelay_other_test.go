//go:build !linux

package gateway

import "testing"

// epollRelay is Linux-only; elsewhere BenchmarkProxy leaves its row out.
func epollRelay(*testing.B, string) string { return "" }
