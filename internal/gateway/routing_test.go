package gateway

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"kvroute/internal/openai"
	"kvroute/router"
	"kvroute/router/routertest"
)

func TestSamePrefixSameBackend(t *testing.T) {
	for _, policy := range []string{"prefix-score", "prefix-cache"} {
		t.Run(policy, func(t *testing.T) {
			h := start(t, testConfig(policy, newFake(t, "a"), newFake(t, "b"), newFake(t, "c")))
			rng := rand.New(rand.NewPCG(7, 7))
			for i := range 6 {
				prompt := routertest.Words(rng, 4000)
				first := h.post(t, "/v1/chat/completions", chatBody(prompt, i%2 == 0, ""))
				second := h.post(t, "/v1/chat/completions", chatBody(prompt, i%2 == 1, ""))
				a, b := first.header.Get("X-Fake-Backend"), second.header.Get("X-Fake-Backend")
				if first.status != 200 || second.status != 200 || a == "" || a != b {
					t.Errorf("prompt %d: first on %q (%d), second on %q (%d)", i, a, first.status, b, second.status)
				}
			}
		})
	}
}

func TestReserveReleaseExactlyOnce(t *testing.T) {
	var s *spy
	cfg := DefaultConfig()
	cfg.Policy = "spy-least-request"
	cfg.Backends = []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}
	g, err := New(cfg, Options{Policies: spyRegistry(&s)})
	if err != nil {
		t.Fatal(err)
	}
	req := &router.Request{ID: "r1", Model: fakeModel, InputTokens: 100, MaxOutputTokens: 20}
	res, err := g.reserve(&call{req: req}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Backends()[res.c.ticket.Index()]; got.InFlight != 1 || got.InFlightTokens != 120 {
		t.Fatalf("after reserve: %+v", got)
	}
	var wg sync.WaitGroup
	wins := make(chan bool, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wins <- res.release(router.Usage{CompletionTokens: 5}, time.Now())
		}()
	}
	wg.Wait()
	close(wins)
	n := 0
	for w := range wins {
		if w {
			n++
		}
	}
	if n != 1 || s.calls != 1 {
		t.Errorf("%d releases took effect and Finished was called %d times; want 1 and 1", n, s.calls)
	}
	for _, b := range g.Backends() {
		if b.InFlight != 0 || b.InFlightTokens != 0 {
			t.Errorf("backend %s: %d in flight, %d tokens after release", b.URL, b.InFlight, b.InFlightTokens)
		}
	}
}

func TestParseRequest(t *testing.T) {
	cases := []struct {
		name   string
		k      kind
		body   string
		header http.Header
		want   router.Request
	}{
		{"chat with user", kindChat, `{"model":"m","user":"alice","max_tokens":9,"messages":[{"role":"system","content":"sys"},{"role":"user","content":"hello"}]}`, nil,
			router.Request{ID: "gw-1", Model: "m", Tenant: "alice", SessionKey: "alice", Prompt: "sys hello", InputTokens: 3, MaxOutputTokens: 9,
				Messages: []router.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "hello"}}}},
		{"session header", kindCompletion, `{"prompt":"abcdefgh"}`, http.Header{"X-Session-Id": {"s9"}},
			router.Request{ID: "gw-1", Tenant: "s9", SessionKey: "s9", Prompt: "abcdefgh", InputTokens: 2}},
		{"user and session", kindCompletion, `{"prompt":[1,2,3],"user":"u"}`, http.Header{"X-Session-Id": {"s"}},
			router.Request{ID: "gw-1", Tenant: "u", SessionKey: "s", Tokens: []int32{1, 2, 3}, InputTokens: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &Gateway{}
			if tc.header == nil {
				tc.header = http.Header{}
			}
			got, e := g.parse(tc.k, []byte(tc.body), &http.Request{Header: tc.header})
			if e != nil {
				t.Fatal(e)
			}
			if string(got.Body) != tc.body {
				t.Errorf("body %q, want the client's %q", got.Body, tc.body)
			}
			got.Body = nil
			if fmt.Sprint(*got) != fmt.Sprint(tc.want) {
				t.Errorf("got  %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestModelsUnion(t *testing.T) {
	h := start(t, testConfig("random", newFake(t, "a", "m1", "lora-x"), newFake(t, "b", "m2", "m1")))
	resp, err := http.Get(h.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list openai.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if list.Object != "list" || strings.Join(ids, ",") != "lora-x,m1,m2" {
		t.Errorf("models %v (object %q), want lora-x,m1,m2", ids, list.Object)
	}
	r := h.post(t, "/v1/completions", `{"model":"m2","prompt":"x"}`)
	if r.status != 200 || r.header.Get("X-Fake-Backend") != "b" {
		t.Errorf("m2 request: status %d on %q, want b", r.status, r.header.Get("X-Fake-Backend"))
	}
}

func TestHealthReadyDrain(t *testing.T) {
	h := start(t, testConfig("random", newFake(t, "a")))
	get := func(path string) int {
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/health"); got != 200 {
		t.Errorf("/health = %d", got)
	}
	if got := get("/ready"); got != 200 {
		t.Errorf("/ready = %d", got)
	}
	h.g.Drain()
	if got := get("/ready"); got != 503 {
		t.Errorf("/ready while draining = %d", got)
	}
	if got := get("/health"); got != 200 {
		t.Errorf("/health while draining = %d", got)
	}
}

// TestReloadKeepsInFlight reloads with a new backend list while a stream is in flight on a
// backend that is dropped: the stream completes, its counts are released, the policy hears
// of the removal (after b's, heard when b was ejected), and new requests go to the new
// backends only.
func TestReloadKeepsInFlight(t *testing.T) {
	a, b, c := newFake(t, "a"), newFake(t, "b"), newFake(t, "c")
	a.hold, a.started = make(chan struct{}), make(chan string, 1)
	h := start(t, testConfig("spy-least-request", a, b))
	b.kill() // so the held stream lands on a
	h.waitHealth(t, b.url(), false)
	b.revive()
	got := make(chan response, 1)
	go func() { got <- h.post(t, "/v1/chat/completions", chatBody("long", true, "")) }()
	<-a.started
	old := h.spy
	if err := h.g.Reload(testConfig("spy-least-request", b, c)); err != nil {
		t.Fatal(err)
	}
	if h.spy != old || strings.Join(old.removed, ",") != "b,a" {
		t.Errorf("policy rebuilt or removal not reported: removed %v", old.removed)
	}
	for range 4 {
		if r := h.post(t, "/v1/chat/completions", chatBody("new", false, "")); r.status != 200 || r.header.Get("X-Fake-Backend") == "a" {
			t.Errorf("after reload: status %d on %q", r.status, r.header.Get("X-Fake-Backend"))
		}
	}
	close(a.hold)
	r := <-got
	if ev := events(r.body); r.status != 200 || len(ev) == 0 || ev[len(ev)-1] != "[DONE]" {
		t.Errorf("stream in flight across the reload: status %d events %q", r.status, ev)
	}
	h.waitHandled(t, 5)
	h.assertNoInFlight(t)
	old.mu.Lock()
	defer old.mu.Unlock()
	if len(old.finished) != 5 || old.calls != 5 {
		t.Errorf("Finished for %d requests (%d calls), want 5", len(old.finished), old.calls)
	}
}

// TestTokenIDsForPoliciesThatReadThem checks that a policy reading token ids gets them from
// a backend's /tokenize with no setting, that one that does not costs no /tokenize call, and
// that tokenize.remote asks for them whatever the policy.
func TestTokenIDsForPoliciesThatReadThem(t *testing.T) {
	for _, tc := range []struct {
		policy string
		remote bool
		want   bool
	}{{"spy-kv-router", false, true}, {"spy-token-load", false, true}, {"spy-round-robin", false, false}, {"spy-round-robin", true, true}} {
		t.Run(fmt.Sprintf("%s/remote=%v", tc.policy, tc.remote), func(t *testing.T) {
			a := newFake(t, "a")
			cfg := testConfig(tc.policy, a)
			cfg.Tokenize.Remote = tc.remote
			h := start(t, cfg)
			if r := h.post(t, "/v1/completions", `{"model":"`+fakeModel+`","prompt":"hello there"}`); r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			if got := a.tokenize.Load() > 0; got != tc.want || h.g.Tokenizes() != tc.want {
				t.Errorf("/tokenize called %d times, Tokenizes() %v; want calls %v", a.tokenize.Load(), h.g.Tokenizes(), tc.want)
			}
		})
	}
}
