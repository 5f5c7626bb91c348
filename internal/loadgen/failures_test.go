package loadgen

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"kvroute/results"
)

// TestFailuresRecorded sends multi-turn sessions to servers that misbehave: every request
// must end in exactly one failed (or rejected) Result naming the cause, and a failed turn
// must end its session.
func TestFailuresRecorded(t *testing.T) {
	head := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvent(w, `{"choices":[{"index":0,"delta":{"content":"hello "}}]}`)
	}
	cases := []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus results.Status
		wantErr    string
	}{
		{"bad json chunk", func(w http.ResponseWriter, r *http.Request) {
			head(w)
			writeEvent(w, `{"choices":[{"delta":`)
			writeEvent(w, "[DONE]")
		}, results.StatusFailed, "bad chunk"},
		{"http 500 with openai error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":{"message":"engine crashed","type":"server_error","param":null,"code":null}}`)
		}, results.StatusFailed, "http 500: engine crashed"},
		{"http 503 no backend", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"no ready backend","type":"server_error","code":"no_backend"}}`)
		}, results.StatusRejected, "http 503: no ready backend"},
		{"http 400 plain text", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "prompt too long", http.StatusBadRequest)
		}, results.StatusRejected, "http 400: prompt too long"},
		{"connection reset mid-stream", func(w http.ResponseWriter, r *http.Request) {
			head(w)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with a reset
			}
			conn.Close()
		}, results.StatusFailed, "stream read"},
		{"missing done", func(w http.ResponseWriter, r *http.Request) {
			head(w)
			writeEvent(w, `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
		}, results.StatusFailed, "truncated stream"},
		{"error event", func(w http.ResponseWriter, r *http.Request) {
			head(w)
			writeEvent(w, `{"error":{"message":"kv cache lost","type":"server_error"}}`)
			writeEvent(w, "[DONE]")
		}, results.StatusFailed, "stream error event: kv cache lost"},
		{"old vllm error event", func(w http.ResponseWriter, r *http.Request) {
			head(w)
			writeEvent(w, `{"object":"error","message":"old style","type":"BadRequestError","code":400}`)
		}, results.StatusFailed, "stream error event: old style"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			checkAllFailed(t, srv.URL, tc.wantStatus, tc.wantErr)
		})
	}
	t.Run("transport error", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		checkAllFailed(t, url, results.StatusFailed, "transport:")
	})
}

func checkAllFailed(t *testing.T, target string, status results.Status, errSub string) {
	t.Helper()
	const n = 6
	rs, st, err := collect(t, context.Background(), Options{Target: target, Model: "m"}, mustStream(t, sharedPrefix(n, 200, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != n || st.Sent != n {
		t.Fatalf("%d results, %d sent; want %d", len(rs), st.Sent, n)
	}
	byID(t, rs)
	for _, r := range rs {
		rec := r.Record
		if rec.Status != status || !contains(rec.Error, errSub) {
			t.Errorf("%s: %s %q; want %s containing %q", rec.ID, rec.Status, rec.Error, status, errSub)
		}
		if rec.Turn != 0 {
			t.Errorf("%s: turn %d sent after a failed turn", rec.ID, rec.Turn)
		}
		if rec.Finish < rec.Arrival {
			t.Errorf("%s: finish %v before arrival %v", rec.ID, rec.Finish, rec.Arrival)
		}
	}
}
