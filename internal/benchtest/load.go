// Package benchtest is the harness of the proxy benchmarks: a trivial OpenAI-shaped backend,
// chat bodies of a given size, a closed-loop HTTP load that reports latency percentiles,
// throughput and CPU time per request, and nginx started as the reference proxy. The gateway's in-process benchmark and cmd/route's
// benchmark across processes share it, so their figures are comparable. Like every package
// named *test it is imported by tests only (internal/archtest checks).
package benchtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvroute/router/routertest"
)

// Model is the model the backend serves and ChatBody asks for.
const Model = "llama-3.1-8b"

var reply = []byte(`{"id":"cmpl-1","object":"chat.completion","model":"` + Model + `","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how can I help?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":8,"total_tokens":520,"prompt_tokens_details":{"cached_tokens":448}}}`)

// Handler is a trivial OpenAI-shaped backend: it reads the body and returns a fixed
// completion, and serves an idle vLLM /metrics and /v1/models, so a benchmark measures HTTP
// and proxy work only.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprint(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.2\n")
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"`+Model+`","object":"model"}]}`)
		default:
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(reply)
		}
	})
}

// Sizes are the chat body sizes the proxy benchmarks use: a short chat, a long document, and
// about 55k tokens, the size at which GIE's EPP plateaus (gateway-api-inference-extension
// issue #2928).
var Sizes = []int{2 << 10, 32 << 10, 220 << 10}

// ChatBody returns a chat completion of about size bytes: a system message and a user message
// of deterministic words.
func ChatBody(size int) []byte {
	const overhead = 110 // the JSON around the user message
	prompt := routertest.Words(rand.New(rand.NewPCG(1, 2)), max(size-overhead, 16))
	body, err := json.Marshal(map[string]any{"model": Model, "max_tokens": 4, "messages": []map[string]string{
		{"role": "system", "content": "You are terse."}, {"role": "user", "content": prompt}}})
	if err != nil {
		panic(err) // unreachable: strings and ints only
	}
	return body
}

// Run sends b.N POSTs of body to url from conc goroutines, each waiting for its response
// before sending the next, and reports latency p50 and p99 in µs, throughput in req/s and,
// when cpu is not nil, the CPU time it measures per request in µs ("cpu-µs/req"). Any failed
// request or non-200 status fails the benchmark.
func Run(b *testing.B, client *http.Client, url string, body []byte, conc int, cpu CPUClock) {
	b.ReportAllocs()
	lat := make([]time.Duration, b.N)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	var cpu0 time.Duration
	if cpu != nil {
		cpu0 = cpu()
	}
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				t := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if cpu != nil {
		b.ReportMetric(float64((cpu()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/req")
	}
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed", n, b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
}

// Client is the load's HTTP client: keep-alive connections for every goroutine, no gzip.
func Client() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}
}
