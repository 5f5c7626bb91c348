package gateway

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

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
