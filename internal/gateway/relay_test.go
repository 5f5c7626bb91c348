package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseEvents is a complete chat stream: a role chunk, two tokens, [DONE].
const sseEvents = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n" +
	`data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}` + "\n\n" +
	`data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}` + "\n\n" +
	"data: [DONE]\n\n"

// TestStreamWithContentLength checks that an event stream the backend sent with a
// Content-Length reaches the client whole, whether the relay passes it on as it came or
// changes its length (a last event missing its blank line, a stream cut short that gains an
// error event): the backend's length is not the client's.
func TestStreamWithContentLength(t *testing.T) {
	for _, tc := range []struct {
		name, sent string
		want       []string // the data payloads the client must get
	}{
		{"whole", sseEvents, []string{"role", "tok", "tok", "[DONE]"}},
		{"last blank line missing", strings.TrimSuffix(sseEvents, "\n"), []string{"role", "tok", "tok", "[DONE]"}},
		{"no [DONE]", strings.TrimSuffix(sseEvents, "data: [DONE]\n\n"), []string{"role", "tok", "tok", "backend_error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFake(t, "a")
			a.handlers = map[string]http.HandlerFunc{"/v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Length", strconv.Itoa(len(tc.sent)))
				_, _ = io.WriteString(w, tc.sent)
			}}
			h := start(t, testConfig("least-request", a))
			r := h.post(t, "/v1/chat/completions", chatBody("hi", true, ""))
			if r.err != nil || r.status != http.StatusOK {
				t.Fatalf("status %d err %v", r.status, r.err)
			}
			got := events(r.body)
			if len(got) != len(tc.want) {
				t.Fatalf("client got %d events %q, want %d", len(got), r.body, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("event %d = %q, want it to hold %q", i, got[i], w)
				}
			}
			h.waitHandled(t, 1)
			h.assertNoInFlight(t)
		})
	}
}

// TestStreamCompleteAtDone checks that a stream whose [DONE] reached the client is counted by
// its status, even when the client hangs up at [DONE] before the backend ends its response
// (clients stop reading there): it is complete, not a client gone (499).
func TestStreamCompleteAtDone(t *testing.T) {
	a := newFake(t, "a")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	a.handlers = map[string]http.HandlerFunc{"/v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseEvents)
		w.(http.Flusher).Flush()
		select { // the response's end comes late: after the client hung up
		case <-r.Context().Done():
		case <-release:
		}
	}}
	h := start(t, testConfig("least-request", a))
	const n = 3
	for i := range n {
		readUntilDone(t, h, fmt.Sprint("prompt ", i))
	}
	h.waitHandled(t, n)
	h.assertNoInFlight(t)
	if got := counterValue(t, h, "kvroute_gateway_requests_total", "status", "200"); got != n {
		t.Errorf("requests with status 200 = %v, want %d", got, n)
	}
	if got := counterValue(t, h, "kvroute_gateway_requests_total", "status", "499"); got != 0 {
		t.Errorf("requests with status 499 = %v, want 0: their [DONE] reached the client", got)
	}
}

// readUntilDone streams a chat request, reads events until [DONE] and closes the connection.
func readUntilDone(t *testing.T, h *harness, prompt string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Post(h.url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(prompt, true, "")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			return
		}
	}
	t.Fatalf("stream ended without [DONE]: %v", sc.Err())
}
