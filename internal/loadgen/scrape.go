package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"kvroute/internal/vllm"
)

// Counters is one reading of a server's vLLM prefix-cache counters.
type Counters struct {
	// URL is the metrics page read.
	URL string
	// VLLM reports that the page had vLLM (or SGLang) series; a router's own page does not,
	// and is then skipped by ServerHitRate.
	VLLM bool
	// Queries and Hits are vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total
	// summed over the page's engines, in tokens.
	Queries, Hits float64
	// Histograms are the page's vLLM latency and step histograms among HistogramNames,
	// summed over its engines; a name the page lacks is absent.
	Histograms map[string]vllm.Histogram
	// Err is why the page could not be read or parsed (VLLM is then false).
	Err error
}

// maxMetricsPage bounds the size of a metrics page read.
const maxMetricsPage = 16 << 20

// Scrape reads each URL's metrics page and returns one Counters per URL, in order. A page
// that cannot be fetched or parsed has Err set; a page without vLLM series has VLLM false
// and no error. A nil client means http.DefaultClient.
func Scrape(ctx context.Context, client *http.Client, urls []string) []Counters {
	if client == nil {
		client = http.DefaultClient
	}
	out := make([]Counters, len(urls))
	for i, u := range urls {
		out[i] = scrapeOne(ctx, client, u)
	}
	return out
}

func scrapeOne(ctx context.Context, client *http.Client, u string) Counters {
	c := Counters{URL: u}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		c.Err = fmt.Errorf("loadgen: scrape %s: %w", u, err)
		return c
	}
	resp, err := client.Do(req)
	if err != nil {
		c.Err = fmt.Errorf("loadgen: scrape: %w", err)
		return c
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.Err = fmt.Errorf("loadgen: scrape %s: http %d", u, resp.StatusCode)
		return c
	}
	body := &bodyReader{r: io.LimitReader(resp.Body, maxMetricsPage)}
	page, err := vllm.ParsePage(body)
	if body.err != nil {
		err = body.err // the transport failed: say so, not what the parser made of a cut page
	}
	if err != nil {
		c.Err = fmt.Errorf("loadgen: scrape %s: %w", u, err)
		return c
	}
	m, err := page.Metrics()
	switch {
	case errors.Is(err, vllm.ErrNoLoadMetrics):
		return c
	case err != nil:
		c.Err = fmt.Errorf("loadgen: scrape %s: %w", u, err)
		return c
	}
	c.VLLM, c.Queries, c.Hits = true, m.PrefixCacheQueries, m.PrefixCacheHits
	if c.Histograms, err = page.Histograms(HistogramNames); err != nil {
		c.Err = fmt.Errorf("loadgen: scrape %s: %w", u, err)
	}
	return c
}

// bodyReader is a page's body that keeps its first read error other than io.EOF.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// ServerHitRate returns the token-weighted prefix-cache hit rate of the servers between
// two readings of the same URLs: the sum of the hits' increases over the sum of the
// queries' increases. Only URLs read as vLLM both times count; a counter that went down
// (the server restarted) counts from zero. ok is false when no URL counts or no query was
// made in between.
func ServerHitRate(before, after []Counters) (rate, queries, hits float64, ok bool) {
	prev := map[string]Counters{}
	for _, c := range before {
		if c.VLLM {
			prev[c.URL] = c
		}
	}
	for _, c := range after {
		b, seen := prev[c.URL]
		if !c.VLLM || !seen {
			continue
		}
		queries += increase(b.Queries, c.Queries)
		hits += increase(b.Hits, c.Hits)
	}
	if queries <= 0 {
		return 0, queries, hits, false
	}
	return min(hits/queries, 1), queries, hits, true
}

// increase is a counter's increase from a to b, counting from zero after a reset.
func increase(a, b float64) float64 {
	if b < a {
		return b
	}
	return b - a
}
