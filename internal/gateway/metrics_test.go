package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// counterValue sums the samples of the counter name whose label has value.
func counterValue(t *testing.T, h *harness, name, label, value string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func TestMetricsEndpoint(t *testing.T) {
	a := newFake(t, "a")
	h := start(t, testConfig("prefix-score", a))
	if r := h.post(t, "/v1/chat/completions", chatBody("x", false, "")); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	h.waitHandled(t, 1)
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	for _, want := range []string{
		"# TYPE kvroute_gateway_requests_total counter",
		`kvroute_gateway_requests_total{backend="` + a.url() + `",policy="prefix-score",reason="max-score",status="200"} 1`,
		"# TYPE kvroute_gateway_decision_duration_seconds histogram",
		"# TYPE kvroute_gateway_proxy_overhead_seconds histogram",
		`kvroute_gateway_inflight_requests{backend="` + a.url() + `"} 0`,
		`kvroute_gateway_backend_healthy{backend="` + a.url() + `"} 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
