package router_test

import (
	"testing"

	"kvroute/router"
)

// TestReadsKVEvents: the proxy warns about a missing event source exactly for the policies
// that decide on KV events; a pipeline whose scorers do not (prefix-score) is not one of them.
func TestReadsKVEvents(t *testing.T) {
	reads := map[string]bool{"kv-router": true, "precise-prefix": true, "predicted-ttft": true}
	reg := router.Builtin()
	for _, name := range reg.Names() {
		p, err := reg.New(name, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := router.ReadsKVEvents(p); got != reads[name] {
			t.Errorf("%s: ReadsKVEvents = %v, want %v", name, got, reads[name])
		}
	}
}
