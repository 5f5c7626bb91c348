package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"kvroute/internal/openai"
)

// TestBackendKilledDuringBurst kills one of three backends while it holds streams and more
// requests arrive: every request completes or ends with a clear error, the in-flight counters
// return to zero, and the dead backend is ejected, then re-admitted when it comes back.
func TestBackendKilledDuringBurst(t *testing.T) {
	hold, started := make(chan struct{}), make(chan string, 256)
	fakes := []*fake{newFake(t, "a"), newFake(t, "b"), newFake(t, "victim")}
	for _, f := range fakes {
		f.hold, f.started = hold, started
	}
	victim := fakes[2]
	h := start(t, testConfig("spy-round-robin", fakes...))

	const n = 45
	results := make(chan response, n)
	var wg sync.WaitGroup
	send := func(i int) {
		defer wg.Done()
		results <- h.post(t, "/v1/chat/completions", chatBody("burst", i%3 != 0, ""))
	}
	wg.Add(n / 3)
	for i := range n / 3 {
		go send(3*i + 1) // streams, held after their first token
	}
	for waitedVictim := false; !waitedVictim; {
		waitedVictim = <-started == "victim"
	}
	victim.kill()
	wg.Add(n - n/3)
	for i := range n - n/3 {
		go send(map[bool]int{true: 3 * i, false: 3*i + 2}[i%2 == 0])
	}
	h.waitHealth(t, victim.url(), false)
	close(hold)
	wg.Wait()
	close(results)
	h.waitHandled(t, n)

	var ok, failed int
	for r := range results {
		switch {
		case r.err != nil:
			t.Errorf("request failed without a clear error: %v", r.err)
		case r.status == http.StatusOK && strings.Contains(r.body, "data: {\"error\""):
			failed++ // the stream broke when the victim died: it says so
		case r.status == http.StatusOK && (strings.HasSuffix(r.body, "data: [DONE]\n\n") || strings.Contains(r.body, `"choices"`)):
			ok++
		case r.status >= 500 && strings.Contains(r.body, `"error"`):
			failed++
		default:
			t.Errorf("unclear outcome: status %d body %q", r.status, r.body)
		}
	}
	if ok+failed != n || failed == 0 || ok < n-n/3 {
		t.Errorf("%d completed, %d clear errors of %d: want every later request completed and the victim's streams failed", ok, failed, n)
	}
	h.assertNoInFlight(t)

	victim.revive()
	h.waitHealth(t, victim.url(), true)
	served := map[string]bool{}
	var log []string
	for range 3 {
		r := h.post(t, "/v1/chat/completions", chatBody("after", false, ""))
		served[r.header.Get("X-Fake-Backend")] = true
		log = append(log, fmt.Sprintf("%d %s %q %v", r.status, r.header.Get("X-Fake-Backend"), r.body, r.err))
	}
	if !served["victim"] {
		t.Errorf("re-admitted backend got no traffic: %v\n%s\n%+v", served, strings.Join(log, "\n"), h.g.Backends())
	}
}

// TestStreamBreaksMidway kills the backend's stream after two tokens, between events or in
// the middle of one: the client gets the whole events that came, then one well-formed error
// event, never a torn one; the two tokens are counted.
func TestStreamBreaksMidway(t *testing.T) {
	for _, midEvent := range []bool{false, true} {
		t.Run(fmt.Sprintf("mid-event=%v", midEvent), func(t *testing.T) {
			a := newFake(t, "a")
			a.dieAfter, a.dieMidEvent = 2, midEvent
			h := start(t, testConfig("spy-least-request", a))
			r := h.post(t, "/v1/chat/completions", chatBody("x", true, ""))
			if r.status != http.StatusOK {
				t.Fatalf("status %d", r.status)
			}
			if err := openai.CheckStream([]byte(r.body)); err != nil {
				t.Errorf("stream %q: %v", r.body, err)
			}
			ev := events(r.body)
			if len(ev) != 4 { // role, 2 tokens, error
				t.Fatalf("events %q, want role, two tokens and an error", ev)
			}
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			if err := json.Unmarshal([]byte(ev[3]), &e); err != nil || e.Error.Code != "backend_error" || e.Error.Type != "server_error" {
				t.Errorf("last event %q: want a backend_error event (%v)", ev[3], err)
			}
			if strings.Contains(e.Error.Message, a.addr) || !strings.Contains(e.Error.Message, "backend a") {
				t.Errorf("error %q: want the backend named a, not its address", e.Error.Message)
			}
			h.waitHandled(t, 1)
			h.assertNoInFlight(t)
			if u := lastFinish(t, h.spy).usage; u.CompletionTokens != 2 {
				t.Errorf("usage %+v: want the 2 tokens streamed counted", u)
			}
		})
	}
}

func TestIdleTimeout(t *testing.T) {
	a := newFake(t, "a")
	a.hold = make(chan struct{})
	t.Cleanup(func() { close(a.hold) })
	cfg := testConfig("least-request", a)
	cfg.Timeouts.Idle = 50 * time.Millisecond
	h := start(t, cfg)
	r := h.post(t, "/v1/chat/completions", chatBody("x", true, ""))
	ev := events(r.body)
	if r.status != 200 || len(ev) == 0 || !strings.Contains(ev[len(ev)-1], `"code":"backend_timeout"`) {
		t.Errorf("status %d events %q: want a backend_timeout error event", r.status, ev)
	}
	h.waitHandled(t, 1)
	h.assertNoInFlight(t)
}

func TestClientDisconnectCancelsBackend(t *testing.T) {
	a := newFake(t, "a")
	a.hold, a.started, a.gone = make(chan struct{}), make(chan string, 1), make(chan struct{}, 1)
	t.Cleanup(func() { close(a.hold) })
	h := start(t, testConfig("spy-least-request", a))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(chatBody("x", true, "")))
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-a.started
	cancel()
	resp.Body.Close()
	<-a.gone // the backend saw its request canceled
	h.waitHandled(t, 1)
	h.assertNoInFlight(t)
	if got := counterValue(t, h, "kvroute_gateway_requests_total", "status", "499"); got != 1 {
		t.Errorf("requests with status 499 = %v, want 1", got)
	}
}
