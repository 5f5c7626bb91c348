package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"kvroute/internal/openai"
	"kvroute/router"
)

func TestProxy(t *testing.T) {
	a, b := newFake(t, "a"), newFake(t, "b")
	h := start(t, testConfig("spy-round-robin", a, b))
	cases := []struct {
		name      string
		path      string
		body      string
		stream    bool
		wantUsage router.Usage // CachedTokens -1: computed from the body by the fake
	}{
		{"chat", "/v1/chat/completions", chatBody("hello", false, ""), false, router.Usage{CompletionTokens: 4, CachedTokens: -1}},
		{"chat stream", "/v1/chat/completions", chatBody("hello", true, ""), true, router.Usage{CompletionTokens: 4}},
		{"chat stream usage", "/v1/chat/completions", chatBody("hello", true, `,"stream_options":{"include_usage":true}`), true, router.Usage{CompletionTokens: 4, CachedTokens: -1}},
		{"completion", "/v1/completions", `{"model":"llama-3.1-8b","prompt":"once upon","max_tokens":2}`, false, router.Usage{CompletionTokens: 2, CachedTokens: -1}},
		{"completion stream", "/v1/completions", `{"model":"llama-3.1-8b","prompt":"once upon","max_tokens":2,"stream":true}`, true, router.Usage{CompletionTokens: 2}},
		{"odd spacing kept", "/v1/completions", "{ \"prompt\" : [\"a\", \"b\"] ,\n \"max_tokens\": 1 }", false, router.Usage{CompletionTokens: 1, CachedTokens: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.post(t, tc.path, tc.body, "X-Session-Id", "s1")
			if resp.err != nil || resp.status != http.StatusOK {
				t.Fatalf("status %d err %v body %s", resp.status, resp.err, resp.body)
			}
			h.waitHandled(t, 1)
			served := a
			if resp.header.Get("X-Fake-Backend") == "b" {
				served = b
			}
			if got := string(served.lastBody()); got != tc.body {
				t.Errorf("backend got %q, want the original bytes %q", got, tc.body)
			}
			checkBody(t, resp.body, tc.stream)
			u := lastFinish(t, h.spy)
			want := tc.wantUsage
			if want.CachedTokens == -1 { // the fake reports len(body)/4 prompt and len/8 cached
				want.PromptTokens, want.CachedTokens = len(tc.body)/4, len(tc.body)/8
			} else {
				want.PromptTokens = (len(promptOf(t, tc.path, tc.body)) + 3) / 4
			}
			if u.usage != want {
				t.Errorf("usage %+v, want %+v", u.usage, want)
			}
			h.assertNoInFlight(t)
		})
	}
}

func promptOf(t *testing.T, path, body string) string {
	t.Helper()
	r, err := (&Gateway{}).parse(map[bool]kind{true: kindChat, false: kindCompletion}[strings.Contains(path, "chat")], []byte(body), &http.Request{Header: http.Header{}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Prompt
}

func checkBody(t *testing.T, body string, stream bool) {
	t.Helper()
	if !stream {
		var v struct{ Choices []any }
		if err := json.Unmarshal([]byte(body), &v); err != nil || len(v.Choices) == 0 {
			t.Errorf("body %q: %v", body, err)
		}
		return
	}
	if err := openai.CheckStream([]byte(body)); err != nil {
		t.Errorf("stream %q: %v", body, err)
	}
	if ev := events(body); len(ev) == 0 || ev[len(ev)-1] != "[DONE]" {
		t.Errorf("stream does not end with [DONE]: %q", body)
	}
}

// lastFinish returns the Finished record of the request with the highest ID.
func lastFinish(t *testing.T, s *spy) finish {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	best, id := -1, ""
	for k := range s.finished {
		var n int
		fmt.Sscanf(k, "gw-%d", &n)
		if n > best {
			best, id = n, k
		}
	}
	if id == "" {
		t.Fatal("no request finished")
	}
	return s.finished[id]
}

func TestRequestErrors(t *testing.T) {
	a := newFake(t, "a")
	cfg := testConfig("prefix-score", a)
	cfg.APIKeys = []string{"k1", "k2"}
	cfg.Limits.MaxBodyBytes = 4096
	h := start(t, cfg)
	auth := []string{"Authorization", "Bearer k2"}
	cases := []struct {
		name       string
		path, body string
		header     []string
		wantStatus int
		wantParam  any
		wantCode   string
	}{
		{"malformed json", "/v1/chat/completions", `{"model":`, auth, 400, nil, "invalid_request"},
		{"wrong type", "/v1/chat/completions", `{"model":1,"messages":[]}`, auth, 400, "model", "invalid_request"},
		{"no messages", "/v1/chat/completions", `{"model":"llama-3.1-8b"}`, auth, 400, "messages", "invalid_request"},
		{"no prompt", "/v1/completions", `{"model":"llama-3.1-8b"}`, auth, 400, "prompt", "invalid_request"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, auth, 404, "model", "model_not_found"},
		{"no api key", "/v1/chat/completions", chatBody("x", false, ""), nil, 401, nil, "invalid_api_key"},
		{"wrong api key", "/v1/chat/completions", chatBody("x", false, ""), []string{"Authorization", "Bearer k3"}, 401, nil, "invalid_api_key"},
		{"too large", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 5000) + `"}`, auth, 413, nil, "request_too_large"},
		{"unknown path", "/v1/embeddings", `{}`, auth, 404, nil, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.post(t, tc.path, tc.body, tc.header...)
			if resp.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.wantStatus, resp.body)
			}
			var e struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal([]byte(resp.body), &e); err != nil {
				t.Fatalf("body %q is not JSON: %v", resp.body, err)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := e.Error[k]; !ok {
					t.Errorf("error body lacks %q: %s", k, resp.body)
				}
			}
			if e.Error["param"] != tc.wantParam || e.Error["code"] != tc.wantCode {
				t.Errorf("param %v code %v, want %v %v", e.Error["param"], e.Error["code"], tc.wantParam, tc.wantCode)
			}
		})
	}
	if r := h.post(t, "/v1/chat/completions", chatBody("x", false, ""), auth...); r.status != 200 {
		t.Errorf("with a valid key: status %d %s", r.status, r.body)
	}
}

func TestNoReadyBackend(t *testing.T) {
	a := newFake(t, "a")
	h := start(t, testConfig("least-request", a))
	a.kill()
	h.waitHealth(t, a.url(), false)
	resp := h.post(t, "/v1/chat/completions", chatBody("x", false, ""))
	if resp.status != http.StatusServiceUnavailable || !strings.Contains(resp.body, `"no_backend"`) {
		t.Errorf("status %d body %s, want 503 no_backend", resp.status, resp.body)
	}
	r, err := http.Get(h.url + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ready = %d with no ready backend", r.StatusCode)
	}
}

// TestBackendIdentityStaysPrivate checks what clients learn of the fleet: nothing by default,
// the backend's name and the decision branch with DebugHeaders, and in an error the backend's
// name, never its address.
func TestBackendIdentityStaysPrivate(t *testing.T) {
	for _, debug := range []bool{false, true} {
		t.Run(fmt.Sprintf("debug-headers=%v", debug), func(t *testing.T) {
			a, dead := newFake(t, "a"), newFake(t, "dead")
			cfg := testConfig("spy-round-robin", a, dead)
			cfg.DebugHeaders = debug
			cfg.Limits.MaxRetries = 0
			cfg.Health.MetricsInterval, cfg.Health.MaxBackoff = time.Hour, time.Hour // the proxy finds it dead
			h := start(t, cfg)
			dead.kill()
			ok, failed := h.post(t, "/v1/chat/completions", chatBody("x", false, "")), h.post(t, "/v1/chat/completions", chatBody("y", false, ""))
			if ok.status != 200 || failed.status != http.StatusBadGateway {
				t.Fatalf("statuses %d, %d: want 200 from a and 502 from the dead backend", ok.status, failed.status)
			}
			wantEndpoint, wantReason := "", ""
			if debug {
				wantEndpoint, wantReason = "a", "round-robin"
			}
			if got := ok.header.Get("X-Kvroute-Endpoint"); got != wantEndpoint {
				t.Errorf("X-Kvroute-Endpoint %q, want %q", got, wantEndpoint)
			}
			if got := ok.header.Get("X-Kvroute-Reason"); (got != "") != (wantReason != "") {
				t.Errorf("X-Kvroute-Reason %q with debug headers %v", got, debug)
			}
			for _, r := range []response{ok, failed} {
				for k, vs := range r.header {
					for _, v := range vs {
						if strings.Contains(v, "127.0.0.1") {
							t.Errorf("header %s: %q shows a backend address", k, v)
						}
					}
				}
			}
			if !strings.Contains(failed.body, "backend dead") || strings.Contains(failed.body, dead.addr) || strings.Contains(failed.body, "127.0.0.1") {
				t.Errorf("502 body %q: want the backend's name, not its address", failed.body)
			}
		})
	}
}
