package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// outcome is how a request through a good and a broken backend ends, counted where load
// does not move it: the client's answer and what each backend received.
type outcome struct {
	status   int    // 200: served by the good backend; 0: a broken response (the client's read fails)
	code     string // in the error body otherwise
	goodSees int    // how many times the good backend received the request
}

// TestFailureRule sends one request to a broken backend first, with a good one behind it,
// under max_retries 0 and 2, streamed and not: a failure before the response head moves the
// request to the good backend unless max_retries is 0 or retry_on leaves its class out; one
// after the head, a 500, or the request's deadline never does. Each backend's count of what
// it received, and the retries metric, say how often the request was sent.
func TestFailureRule(t *testing.T) {
	served := outcome{200, "", 1}
	cases := []ruleCase{
		{"connection refused", func(bad, _ *fake) { bad.kill() }, nil, 0, outcome{502, "backend_error", 0}, served},
		{"reset before the head", func(bad, _ *fake) { bad.headless.Store(headlessReset) }, nil, 1, outcome{502, "backend_error", 0}, served},
		{"closed before the head", func(bad, _ *fake) { bad.headless.Store(headlessClose) }, nil, 1, outcome{502, "backend_error", 0}, served},
		{"503", func(bad, _ *fake) { bad.status = http.StatusServiceUnavailable }, nil, 1, outcome{503, "busy, try again", 0}, served},
		{"429", func(bad, _ *fake) { bad.status = http.StatusTooManyRequests }, nil, 1, outcome{429, "busy, try again", 0}, served},
		{"every backend busy", func(bad, good *fake) { bad.status, good.status = 503, 503 }, nil, 1,
			outcome{503, "busy, try again", 0}, outcome{503, "backend_busy", 1}},
		{"header timeout", func(bad, _ *fake) { bad.noHeaders = make(chan struct{}) },
			func(c *Config) { c.Timeouts.Header = 500 * time.Millisecond }, 1, outcome{504, "backend_timeout", 0}, served},
		{"request deadline", func(bad, _ *fake) { bad.noHeaders = make(chan struct{}) },
			func(c *Config) { c.Timeouts.Request = time.Second }, 1, outcome{504, "backend_timeout", 0}, outcome{504, "backend_timeout", 0}},
		{"500 is relayed", func(bad, _ *fake) { bad.status = http.StatusInternalServerError }, nil, 1,
			outcome{500, "busy, try again", 0}, outcome{500, "busy, try again", 0}},
		{"broken after the head", func(bad, _ *fake) { bad.abortBeforeBody = true }, nil, 1, outcome{}, outcome{}},
		{"reset, retry_on without it", func(bad, _ *fake) { bad.headless.Store(headlessReset) },
			func(c *Config) { c.Limits.RetryOn = []string{RetryConnect, RetryBusy} }, 1, outcome{502, "backend_error", 0}, outcome{502, "backend_error", 0}},
		{"refused, retry_on with it", func(bad, _ *fake) { bad.kill() },
			func(c *Config) { c.Limits.RetryOn = []string{RetryConnect, RetryBusy} }, 0, outcome{502, "backend_error", 0}, served},
	}
	for _, tc := range cases {
		for _, retries := range []int{0, 2} {
			for _, stream := range []bool{false, true} {
				want := map[bool]outcome{false: tc.never, true: tc.twice}[retries > 0]
				t.Run(fmt.Sprintf("%s/max_retries=%d/stream=%v", tc.name, retries, stream), func(t *testing.T) {
					t.Parallel()
					tc.run(t, retries, stream, want)
				})
			}
		}
	}
}

// ruleCase is a broken backend TestFailureRule sends a request to.
type ruleCase struct {
	name    string
	breakIt func(bad, good *fake)
	cfg     func(*Config)
	badSees int // 0: the connection could not be made
	never   outcome
	twice   outcome // with max_retries 2
}

// run sends one request, streamed or not, to the broken backend first and the good one
// behind it, under max_retries retries, and checks that it ends as want says.
func (tc ruleCase) run(t *testing.T, retries int, stream bool, want outcome) {
	bad, good := newFake(t, "bad"), newFake(t, "good")
	cfg := testConfig("first-ready", bad, good)
	cfg.Health.MetricsInterval, cfg.Health.MaxBackoff = time.Hour, time.Hour // only the proxy path sees the failure
	cfg.Limits.MaxRetries = retries
	if tc.cfg != nil {
		tc.cfg(&cfg)
	}
	h := start(t, cfg)
	tc.breakIt(bad, good)
	r := h.post(t, "/v1/chat/completions", chatBody("rule-test", stream, ""))
	h.waitHandled(t, 1)
	checkOutcome(t, r, stream, want)
	if got := bad.receivedWith("rule-test"); got != tc.badSees {
		t.Errorf("the broken backend received the request %d times, want %d", got, tc.badSees)
	}
	if got := good.receivedWith("rule-test"); got != want.goodSees {
		t.Errorf("the good backend received the request %d times, want %d", got, want.goodSees)
	}
	if got := counterValue(t, h, "kvroute_gateway_retries_total", "backend", "bad"); got != float64(want.goodSees) {
		t.Errorf("retries counted for the broken backend: %v, want %d", got, want.goodSees)
	}
	h.assertNoInFlight(t)
}

// checkOutcome checks the client's answer r against want.
func checkOutcome(t *testing.T, r response, stream bool, want outcome) {
	t.Helper()
	switch {
	case want.status == 0:
		if r.err == nil {
			t.Errorf("status %d body %q: want a broken response", r.status, r.body)
		}
	case want.status == http.StatusOK:
		if r.status != http.StatusOK || r.header.Get("X-Fake-Backend") != "good" {
			t.Fatalf("status %d from %q: %q %v, want 200 from the good backend", r.status, r.header.Get("X-Fake-Backend"), r.body, r.err)
		}
		checkBody(t, r.body, stream)
	case r.status != want.status || !strings.Contains(r.body, want.code):
		t.Errorf("status %d body %q err %v, want %d with %q", r.status, r.body, r.err, want.status, want.code)
	}
}

func TestRetryOnValidate(t *testing.T) {
	cases := []struct {
		name    string
		retryOn []string
		want    []string // substrings of the error; none means valid
	}{
		{"nil: every class", nil, nil},
		{"certainly unsent", []string{RetryConnect, RetryBusy}, nil},
		{"every class", []string{RetryConnect, RetryReset, RetryBusy, RetryHeaderTimeout}, nil},
		{"empty", []string{}, []string{"limits.retry_on: empty"}},
		{"unknown and twice", []string{"reset", "timeout", "reset"}, []string{`limits.retry_on[1] "timeout": want one of`, `limits.retry_on[2] "reset": listed twice`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Backends = []string{"http://127.0.0.1:8000"}
			c.Limits.RetryOn = tc.retryOn
			err := c.Validate()
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if len(tc.want) > 0 && err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestTransportNeverReplays sends a request with an Idempotency-Key header on a kept-alive
// connection to a backend that reads it and closes the connection: with max_retries 0 the
// backend receives it exactly once (net/http replays such a request on its own when the
// outgoing request can rewind its body), and the client gets a 502.
func TestTransportNeverReplays(t *testing.T) {
	for _, header := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		t.Run(header, func(t *testing.T) {
			a := newFake(t, "a")
			// Completions get a transport of their own, so the keyed request goes on the
			// warm-up's connection, kept alive for a minute, and on no other.
			var rewindable atomic.Int32
			completions, others := NewTransport(), NewTransport()
			completions.IdleConnTimeout = time.Minute
			t.Cleanup(completions.CloseIdleConnections)
			t.Cleanup(others.CloseIdleConnections)
			cfg := testConfig("first-ready", a)
			cfg.Limits.MaxRetries = 0
			h := startOpts(t, cfg, Options{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if !strings.HasSuffix(req.URL.Path, "completions") {
					return others.RoundTrip(req)
				}
				if req.GetBody != nil {
					rewindable.Add(1)
				}
				return completions.RoundTrip(req)
			})})
			if r := h.post(t, "/v1/chat/completions", chatBody("warm-up", false, "")); r.status != http.StatusOK {
				t.Fatalf("warm-up: status %d %q", r.status, r.body)
			}
			a.headless.Store(headlessClose)
			r := h.post(t, "/v1/chat/completions", chatBody("keyed", false, ""), header, "k-1")
			h.waitHandled(t, 2)
			if r.status != http.StatusBadGateway || !strings.Contains(r.body, `"backend_error"`) {
				t.Errorf("status %d body %q err %v, want 502 backend_error", r.status, r.body, r.err)
			}
			peers := a.peersWith("keyed")
			if len(peers) != 1 {
				t.Errorf("the backend received the keyed request %d times from %v, want once", len(peers), peers)
			}
			if len(peers) == 0 || a.requestsFrom(peers[0]) < 2 {
				t.Errorf("the keyed request came on a new connection (%v): want a kept-alive one, where net/http would replay it", peers)
			}
			if n := rewindable.Load(); n != 0 {
				t.Errorf("%d outgoing completion requests had GetBody set: the transport could replay them", n)
			}
			h.assertNoInFlight(t)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
