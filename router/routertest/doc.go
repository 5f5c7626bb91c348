// Package routertest holds the conformance suite every routing policy must pass, and helpers
// that build snapshots and request streams for policy tests and benchmarks.
package routertest
