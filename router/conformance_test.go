package router_test

import (
	"testing"

	"kvroute/router"
	"kvroute/router/routertest"
)

// TestConformance runs the shared suite once per registered policy, as a subtest named after it.
func TestConformance(t *testing.T) {
	reg := router.Builtin()
	for _, name := range reg.Names() {
		t.Run(name, func(t *testing.T) {
			routertest.Conformance(t, func(seed uint64) router.Policy {
				p, err := reg.New(name, nil, seed)
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}
