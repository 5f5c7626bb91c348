package loadgen

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"kvroute/internal/vllm"
)

// vllmPage serves a vLLM metrics page whose prefix-cache counters grow by queries and hits
// tokens per scrape.
func vllmPage(t *testing.T, queries, hits float64) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := float64(n.Add(1))
		vllm.Write(w, []vllm.Engine{{Model: "m", PrefixCacheQueries: 1000 + k*queries, PrefixCacheHits: 100 + k*hits}})
	}))
}

func TestServerHitRate(t *testing.T) {
	a, b := vllmPage(t, 1000, 500), vllmPage(t, 3000, 500)
	defer a.Close()
	defer b.Close()
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# TYPE kvroute_requests_total counter\nkvroute_requests_total 7\n")
	}))
	defer router.Close()
	broken := httptest.NewServer(http.NotFoundHandler())
	defer broken.Close()
	urls := []string{a.URL, b.URL, router.URL, broken.URL}
	before := Scrape(context.Background(), nil, urls)
	after := Scrape(context.Background(), nil, urls)
	for i, want := range []struct{ vllm, err bool }{{true, false}, {true, false}, {false, false}, {false, true}} {
		if c := after[i]; c.VLLM != want.vllm || (c.Err != nil) != want.err {
			t.Errorf("%s: vllm %v err %v; want vllm %v, error %v", c.URL, c.VLLM, c.Err, want.vllm, want.err)
		}
	}
	rate, q, h, ok := ServerHitRate(before, after)
	if !ok || q != 4000 || h != 1000 || math.Abs(rate-0.25) > 1e-12 {
		t.Errorf("hit rate %v (%v/%v, ok %v); want 0.25 (1000/4000)", rate, h, q, ok)
	}
}

func TestServerHitRateEdges(t *testing.T) {
	c := func(url string, vllm bool, q, h float64) Counters {
		return Counters{URL: url, VLLM: vllm, Queries: q, Hits: h}
	}
	cases := []struct {
		name          string
		before, after []Counters
		want          float64
		wantOK        bool
	}{
		{"counter reset counts from zero", []Counters{c("a", true, 500, 400)}, []Counters{c("a", true, 100, 50)}, 0.5, true},
		{"no vllm page", []Counters{c("r", false, 0, 0)}, []Counters{c("r", false, 0, 0)}, 0, false},
		{"no queries in between", []Counters{c("a", true, 5, 1)}, []Counters{c("a", true, 5, 1)}, 0, false},
		{"page missing before", nil, []Counters{c("a", true, 5, 1)}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _, _, ok := ServerHitRate(tc.before, tc.after)
			if ok != tc.wantOK || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestScrapeCutBody checks that a page whose body ends before its Content-Length is reported
// as the failed read it is, not as a parse error of the text that did arrive.
func TestScrapeCutBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "vllm:num_requests_running{engine=\"0\"} 3\nvllm:num_requests_wai")
	}))
	defer srv.Close()
	got := Scrape(context.Background(), nil, []string{srv.URL})[0]
	want := "loadgen: scrape " + srv.URL + ": unexpected EOF"
	if got.Err == nil || got.Err.Error() != want || got.VLLM {
		t.Errorf("err %v, vllm %v; want %q and no vLLM reading", got.Err, got.VLLM, want)
	}
}
