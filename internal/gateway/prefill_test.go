package gateway

import (
	"testing"
	"time"

	"kvroute/router"
)

type constPrefill time.Duration

func (c constPrefill) PrefillTime(int, int, int, int64) time.Duration { return time.Duration(c) }
func (c constPrefill) BatchTime(int, int, int64) time.Duration        { return time.Duration(c) }

// TestPrefillReachesThePolicy checks that the configured step-time models, by backend name or
// URL, end up in the endpoints the policy sees, and that backends without one get nil.
func TestPrefillReachesThePolicy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy = "predicted-ttft"
	cfg.Backends = []string{"a=http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"}
	cfg.Prefill = map[string]router.PrefillPredictor{"a": constPrefill(1), "http://127.0.0.1:2": constPrefill(2)}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	g.mu.Lock()
	g.refreshView()
	g.mu.Unlock()
	for _, e := range g.lc.Endpoints() {
		got = append(got, e.Prefill)
	}
	if got[0] != constPrefill(1) || got[1] != constPrefill(2) || got[2] != nil {
		t.Errorf("endpoints' Prefill = %v, want [1 2 <nil>]", got)
	}
}
