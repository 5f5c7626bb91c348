// Package e2e holds end-to-end tests of the live system on loopback: simulated vLLM replicas
// (internal/emulate) behind the production router (internal/gateway), driven by an HTTP client.
// It has tests only.
package e2e
