package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tokenAnswer is a /tokenize answer of n ids of 7 digits (8 bytes each with the comma), with
// max_model_len when it is > 0.
func tokenAnswer(n, maxModelLen int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"count":%d,`, n)
	if maxModelLen > 0 {
		fmt.Fprintf(&b, `"max_model_len":%d,`, maxModelLen)
	}
	b.WriteString(`"tokens":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(1000000 + i%9000000))
	}
	b.WriteString("]}")
	return b.Bytes()
}

// answering makes f's /tokenize answer with answer, counting the calls in f.tokenize.
func answering(f *fake, answer []byte) {
	f.handlers = map[string]http.HandlerFunc{"/tokenize": func(w http.ResponseWriter, r *http.Request) {
		f.tokenize.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(answer)
	}}
}

// hanging makes f's /tokenize hang until its caller gives up, counting the calls.
func hanging(t *testing.T, f *fake) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	f.handlers = map[string]http.HandlerFunc{"/tokenize": func(w http.ResponseWriter, r *http.Request) {
		f.tokenize.Add(1)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}}
}

// countingTransport counts the bytes the gateway reads of /tokenize response bodies.
type countingTransport struct {
	http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(r)
	if err == nil && r.URL.Path == "/tokenize" {
		resp.Body = &countedBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// tokenizeResults returns how many requests ended with each result of fillTokens.
func tokenizeResults(t *testing.T, h *harness) map[string]uint64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() == "kvroute_gateway_tokenize_duration_seconds" {
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return out
}

// gaugeValue is the value of the gauge name whose label has value.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if mf.GetName() == name && lp.GetName() == label && lp.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func completion(prompt string) string {
	return `{"model":"` + fakeModel + `","max_tokens":1,"prompt":` + quote(prompt) + `}`
}

// TestTokenizeAnswerOverCap checks that a /tokenize answer with more ids than the cap
// (tokenize.max_tokens, or the backend's max_model_len once an answer gave it) is not used:
// the request is served without ids, the gateway reads no more of the answer than the cap
// allows, and the same prompt again asks no backend.
func TestTokenizeAnswerOverCap(t *testing.T) {
	for _, tc := range []struct {
		name             string
		maxTokens        int
		ids, maxModelLen int // the backend's answer
		limits           [2]int
	}{
		{"over tokenize.max_tokens", 1000, 100_000, 0, [2]int{1000, 1000}},
		// The first answer is read whole (it is under max_tokens); it gives max_model_len,
		// which bounds the read of the second.
		{"over max_model_len", 1 << 18, 100_000, 4096, [2]int{1 << 18, 4096}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFake(t, "a")
			answer := tokenAnswer(tc.ids, tc.maxModelLen)
			answering(a, answer)
			cfg := testConfig("spy-round-robin", a)
			cfg.Tokenize.Remote, cfg.Tokenize.MaxTokens = true, tc.maxTokens
			rt := &countingTransport{RoundTripper: NewTransport()}
			h := startOpts(t, cfg, Options{Transport: rt})
			for _, p := range []string{"first", "second", "first"} {
				if r := h.post(t, "/v1/completions", completion(p)); r.status != 200 {
					t.Fatalf("prompt %q: status %d %s", p, r.status, r.body)
				}
			}
			got := tokenizeResults(t, h)
			if got[tokTooLong] != 3 || got[tokMiss] != 0 {
				t.Errorf("results %v, want 3 too_long and no miss", got)
			}
			if calls := a.tokenize.Load(); calls != 2 {
				t.Errorf("/tokenize called %d times, want 2: the repeated prompt is known too long", calls)
			}
			var maxRead int64
			for _, limit := range tc.limits {
				maxRead += min(int64(len(answer)), answerSlack+answerBytesPerID*int64(limit)+1)
			}
			if read := rt.read.Load(); read > maxRead {
				t.Errorf("read %d bytes of /tokenize answers, want at most %d", read, maxRead)
			}
		})
	}
}

// TestTokenizeCacheBytes fills the token id cache with more ids than tokenize.cache_bytes
// allows: it keeps within the bound, and so does the heap the gateway retains.
func TestTokenizeCacheBytes(t *testing.T) {
	const ids, prompts, bound = 1 << 15, 32, 1 << 19 // 128 KiB of ids a prompt, 4 MiB offered
	a := newFake(t, "a")
	answering(a, tokenAnswer(ids, 0))
	cfg := testConfig("spy-round-robin", a)
	cfg.Tokenize.Remote, cfg.Tokenize.CacheBytes = true, bound
	h := start(t, cfg)
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	send := func(p string) {
		if r := h.post(t, "/v1/completions", completion(p)); r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
	}
	send("warm up")
	before := heap()
	for i := range prompts {
		send(fmt.Sprint("prompt ", i))
	}
	grown := heap() - before
	if got := tokenizeResults(t, h); got[tokMiss] != prompts+1 {
		t.Fatalf("results %v, want %d misses", got, prompts+1)
	}
	if h.g.tok.cache != nil {
		if entries, size := h.g.tok.cache.size(); size > bound || entries == 0 {
			t.Errorf("cache holds %d entries of %d bytes, want some and at most %d bytes", entries, size, bound)
		}
	}
	if grown > 2*bound {
		t.Errorf("the heap grew by %d KiB for %d prompts of %d ids, want under %d KiB", grown>>10, prompts, ids, 2*bound>>10)
	}
}

// TestHungTokenizer checks that a backend whose /tokenize hangs costs its timeout once: the
// request that met it asks another ready backend's tokenizer, and later requests do not ask
// it again within tokenize.cooldown (counted at the hung backend), so they wait for nothing.
func TestHungTokenizer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		good     bool // a second backend with a working /tokenize
		want     map[string]uint64
		wantGood int64 // /tokenize calls the good backend answered
	}{
		{"another replica's tokenizer", true, map[string]uint64{tokMiss: 4}, 4},
		{"no other tokenizer", false, map[string]uint64{tokError: 1, tokUnavailable: 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hung := newFake(t, "hung")
			hanging(t, hung)
			fakes := []*fake{hung}
			if tc.good {
				fakes = append(fakes, newFake(t, "good"))
			}
			cfg := testConfig("spy-round-robin", fakes...)
			cfg.Tokenize.Remote, cfg.Tokenize.Timeout, cfg.Tokenize.Cooldown = true, 200*time.Millisecond, time.Hour
			h := start(t, cfg)
			for i := range 4 {
				if r := h.post(t, "/v1/completions", completion(fmt.Sprint("prompt ", i))); r.status != 200 {
					t.Fatalf("status %d %s", r.status, r.body)
				}
			}
			if calls := hung.tokenize.Load(); calls != 1 {
				t.Errorf("the hung /tokenize was called %d times, want 1", calls)
			}
			if tc.good && fakes[1].tokenize.Load() != tc.wantGood {
				t.Errorf("the good /tokenize answered %d calls, want %d", fakes[1].tokenize.Load(), tc.wantGood)
			}
			got := tokenizeResults(t, h)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("results %v, want %v", got, tc.want)
					break
				}
			}
			if up := gaugeValue(t, h.reg, "kvroute_gateway_tokenizer_up", "backend", "hung"); up != 0 {
				t.Errorf("tokenizer_up{backend=hung} = %v, want 0", up)
			}
			if n := counterValue(t, h, "kvroute_gateway_tokenize_failures_total", "reason", "timeout"); n != 1 {
				t.Errorf("tokenize failures by timeout = %v, want 1", n)
			}
		})
	}
}

// TestIDCache checks the cache's two bounds and its byte count through replacements.
func TestIDCache(t *testing.T) {
	ids := func(n int) []int32 { return make([]int32, n) }
	cost := func(n int) int64 { return 4*int64(n) + idEntryOverhead }
	for _, tc := range []struct {
		name        string
		entries     int
		maxBytes    int64
		adds        []int // sizes, added under keys 0, 1, 2, ...; a negative size re-adds key 0 with -size ids
		wantEntries int
		wantBytes   int64
	}{
		{"entry bound", 2, 1 << 20, []int{10, 10, 10}, 2, 2 * cost(10)},
		{"byte bound", 100, 2*cost(100) + 10, []int{100, 100, 100}, 2, 2 * cost(100)},
		{"larger than the bound", 100, 1 << 10, []int{1 << 10}, 0, 0},
		{"replaced", 100, 1 << 20, []int{10, 20, -30}, 2, cost(20) + cost(30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newIDCache(tc.entries, tc.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range tc.adds {
				key := uint64(i)
				if n < 0 {
					key, n = 0, -n
				}
				c.add(key, ids(n))
			}
			if entries, bytes := c.size(); entries != tc.wantEntries || bytes != tc.wantBytes {
				t.Errorf("size() = %d entries, %d bytes; want %d, %d", entries, bytes, tc.wantEntries, tc.wantBytes)
			}
		})
	}
}

// FuzzDecodeAnswer checks that decoding any answer reads at most the bytes the cap allows
// and yields ids only when the count matches.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte(`{"count":3,"max_model_len":8192,"tokens":[7,8,9]}`), 100)
	f.Add(tokenAnswer(50, 0), 10)
	f.Add([]byte(`{"count":1,"tokens":[4294967295]}`), 1)
	f.Fuzz(func(t *testing.T, body []byte, maxBytes int) {
		if maxBytes < 0 || maxBytes > 1<<20 {
			return
		}
		src := &countedBody{ReadCloser: io.NopCloser(bytes.NewReader(body)), n: new(atomic.Int64)}
		out, err := decodeAnswer(&http.Response{Body: src, ContentLength: -1}, int64(maxBytes))
		if read := src.n.Load(); read > int64(maxBytes)+1 {
			t.Errorf("read %d bytes, cap %d", read, maxBytes)
		}
		if err == nil && out.Count != len(out.Tokens) {
			t.Errorf("count %d for %d tokens accepted", out.Count, len(out.Tokens))
		}
		if len(body) <= maxBytes && errors.Is(err, errTooManyTokens) {
			t.Errorf("a body within the cap failed as too long: %v", err)
		}
	})
}

// TestTokenizerCooldown steps one backend's tokenizer through a failure, its cooldown, the
// one probe after it, and a success, on explicit times.
func TestTokenizerCooldown(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := newTokenizer(DefaultTokenizeConfig(), nil, m)
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: "a"}
	t0 := time.Unix(1000, 0)
	const cooldown, probe = 10 * time.Second, 2 * time.Second
	for _, step := range []struct {
		name string
		do   func()
		at   time.Duration // when claim is asked, from t0
		want bool
	}{
		{"never asked", func() {}, 0, true},
		{"failed: cooling down", func() { tok.failed(b, "timeout", t0.Add(cooldown)) }, 5 * time.Second, false},
		{"cooldown passed: this request probes", func() {}, 11 * time.Second, true},
		{"another request while the probe runs", func() {}, 12 * time.Second, false},
		{"the probe's slot passed", func() {}, 11*time.Second + probe, true},
		{"answered", func() { tok.succeeded(b, 0) }, 14 * time.Second, true},
		{"answered, asked again at once", func() {}, 14 * time.Second, true},
	} {
		step.do()
		if got := tok.claim(b, t0.Add(step.at), probe); got != step.want {
			t.Errorf("%s: claim = %v, want %v", step.name, got, step.want)
		}
	}
}
