package benchload

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestChatBody(t *testing.T) {
	body := ChatBody()
	var req struct {
		Model    string `json:"model"`
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if req.Model != Model || len(req.Messages) != 2 || len(body) < 1900 || len(body) > 2200 {
		t.Fatalf("body of %d bytes: %+v", len(body), req)
	}
	if string(ChatBody()) != string(body) {
		t.Fatal("ChatBody is not deterministic")
	}
}

// TestRun checks that Run reports its metrics against the trivial backend and fails the
// benchmark when the server answers with an error.
func TestRun(t *testing.T) {
	ok := httptest.NewServer(Handler())
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	client := Client()
	run := func(url string) testing.BenchmarkResult {
		return testing.Benchmark(func(b *testing.B) { Run(b, client, url+"/v1/chat/completions", ChatBody(), 4) })
	}
	if r := run(ok.URL); r.N == 0 || r.Extra["req/s"] <= 0 || r.Extra["p50-µs"] <= 0 || r.Extra["p99-µs"] < r.Extra["p50-µs"] {
		t.Fatalf("against the backend: %+v", r)
	}
	if r := run(bad.URL); r.N != 0 {
		t.Fatalf("against a failing server the benchmark passed: %+v", r)
	}
}
