package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
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

// TestMetricsEndpoint checks the gateway's series, labelled by backend name: /metrics shows
// no backend URL, and asks for the API key when keys are configured; the admin handler does
// not.
func TestMetricsEndpoint(t *testing.T) {
	a := newFake(t, "a")
	cfg := testConfig("prefix-score", a)
	cfg.APIKeys = []string{"k1"}
	h := start(t, cfg)
	if r := h.post(t, "/v1/chat/completions", chatBody("x", false, ""), "Authorization", "Bearer k1"); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	h.waitHandled(t, 1)
	get := func(url, key string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := get(h.url+"/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("/metrics without the key: status %d, want 401", status)
	}
	status, page := get(h.url+"/metrics", "k1")
	admin := httptest.NewServer(h.g.AdminHandler())
	defer admin.Close()
	adminStatus, adminPage := get(admin.URL+"/metrics", "")
	if status != 200 || adminStatus != 200 {
		t.Fatalf("/metrics: status %d with the key, %d on the admin handler", status, adminStatus)
	}
	for _, p := range []string{page, adminPage} {
		for _, want := range []string{
			"# TYPE kvroute_gateway_requests_total counter",
			`kvroute_gateway_requests_total{backend="a",policy="prefix-score",reason="max-score",status="200"} 1`,
			"# TYPE kvroute_gateway_decision_duration_seconds histogram",
			"# TYPE kvroute_gateway_proxy_overhead_seconds histogram",
			`kvroute_gateway_inflight_requests{backend="a"} 0`,
			`kvroute_gateway_backend_healthy{backend="a"} 1`,
		} {
			if !strings.Contains(p, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		if strings.Contains(p, a.addr) {
			t.Errorf("/metrics shows the backend's address %s", a.addr)
		}
	}
}

// TestAdminMethods checks that /health, /ready and /metrics answer GET and HEAD only.
func TestAdminMethods(t *testing.T) {
	h := start(t, testConfig("random", newFake(t, "a")))
	for _, path := range []string{"/health", "/ready", "/metrics"} {
		for method, want := range map[string]int{http.MethodGet: 200, http.MethodHead: 200, http.MethodPost: 405, http.MethodDelete: 405} {
			req, _ := http.NewRequest(method, h.url+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s %s: status %d, want %d", method, path, resp.StatusCode, want)
			}
			if want == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q", method, path, resp.Header.Get("Allow"))
			}
		}
	}
}
