package benchtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

func TestChatBody(t *testing.T) {
	for _, size := range Sizes {
		body := ChatBody(size)
		var req struct {
			Model    string `json:"model"`
			Messages []struct{ Role, Content string }
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		if req.Model != Model || len(req.Messages) != 2 || len(body) < size*95/100 || len(body) > size*105/100 {
			t.Fatalf("size %d: body of %d bytes: %+v", size, len(body), req)
		}
		if string(ChatBody(size)) != string(body) {
			t.Fatal("ChatBody is not deterministic")
		}
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
		return testing.Benchmark(func(b *testing.B) { Run(b, client, url+"/v1/chat/completions", ChatBody(2048), 4, SelfCPU) })
	}
	if r := run(ok.URL); r.N == 0 || r.Extra["req/s"] <= 0 || r.Extra["p50-µs"] <= 0 || r.Extra["p99-µs"] < r.Extra["p50-µs"] || r.Extra["cpu-µs/req"] <= 0 {
		t.Fatalf("against the backend: %+v", r)
	}
	if r := run(bad.URL); r.N != 0 {
		t.Fatalf("against a failing server the benchmark passed: %+v", r)
	}
}

// TestProcessCPU checks that the /proc clock of this process moves with the work it does, and
// agrees with getrusage.
func TestProcessCPU(t *testing.T) {
	clock := ProcessCPU(os.Getpid())
	before, self0 := clock(), SelfCPU()
	x := 0
	for SelfCPU()-self0 < 50*time.Millisecond {
		for i := range 1_000_000 {
			x += i
		}
	}
	_ = x
	got, want := clock()-before, SelfCPU()-self0
	if got <= 0 || got < want/2 || got > want*2+20*time.Millisecond {
		t.Errorf("/proc clock moved %v while getrusage moved %v", got, want)
	}
}
