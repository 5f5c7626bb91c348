package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"kvroute/internal/openai"
	"kvroute/internal/vllm"
)

// maxScrapeBytes bounds a /metrics or /v1/models page.
const maxScrapeBytes = 8 << 20

// scrapeLoop probes b at once, then after every nextProbe delay, until ctx is done or b
// leaves the pool.
func (g *Gateway) scrapeLoop(ctx context.Context, b *backend) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.stop:
			return
		case <-timer.C:
		}
		g.probe(ctx, b)
		timer.Reset(g.nextProbe(b))
	}
}

// Probe scrapes every backend once, concurrently, and returns when all are done: callers
// use it to know the backends' state before serving.
func (g *Gateway) Probe(ctx context.Context) {
	var wg sync.WaitGroup
	for _, b := range g.current.Load().backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.probe(ctx, b)
		}()
	}
	wg.Wait()
}

// probe scrapes b's /metrics, records the result, and refreshes its model list when due.
func (g *Gateway) probe(ctx context.Context, b *backend) {
	hc := g.current.Load().cfg.Health
	start := time.Now()
	m, err := g.scrape(ctx, b.metricsURL, hc.ScrapeTimeout)
	if ctx.Err() != nil {
		return
	}
	if g.recordScrape(b, m, err, start, time.Now(), hc) {
		g.refreshModels(ctx, b, hc.ScrapeTimeout)
	}
}

// nextProbe is the delay before b's next probe: the scrape interval while b is admitted, and
// an interval doubling with each failed probe, up to MaxBackoff, while it is ejected.
func (g *Gateway) nextProbe(b *backend) time.Duration {
	hc := g.current.Load().cfg.Health
	g.mu.Lock()
	ready, k := b.ready, b.failures-hc.FailureThreshold
	g.mu.Unlock()
	if ready || k <= 0 {
		return hc.MetricsInterval
	}
	d := hc.MetricsInterval
	for ; k > 0 && d < hc.MaxBackoff; k-- {
		d *= 2
	}
	return min(d, hc.MaxBackoff)
}

// get fetches url within timeout and hands read the body of a 200 response, at most limit
// bytes of it; any other status is an error naming url.
func (g *Gateway) get(ctx context.Context, url string, timeout time.Duration, limit int64, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := g.scraper.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxScrapeBytes))
		return fmt.Errorf("gateway: GET %s: status %d", url, resp.StatusCode)
	}
	return read(io.LimitReader(resp.Body, limit))
}

func (g *Gateway) scrape(ctx context.Context, url string, timeout time.Duration) (vllm.Metrics, error) {
	var m vllm.Metrics
	err := g.get(ctx, url, timeout, maxScrapeBytes, func(r io.Reader) (err error) {
		m, err = vllm.Parse(r)
		return err
	})
	return m, err
}

// recordScrape stores the result of a scrape started at start and read at now, and ejects or
// re-admits b. A good scrape started before b's last ejection by the proxy does not re-admit
// it: the proxy's failure is the newer news. It reports whether b's model list should be
// fetched now.
func (g *Gateway) recordScrape(b *backend, m vllm.Metrics, err error, start, now time.Time, hc HealthConfig) bool {
	g.mu.Lock()
	wasReady := b.ready
	if err != nil {
		b.failures++
		b.lastErr = err
		if b.ready && b.failures >= hc.FailureThreshold {
			b.ready = false
		}
	} else {
		b.running, b.waiting, b.kvUsage, b.numGPUBlocks, b.blockSize = m.Running, m.Waiting, m.KVUsage, m.NumGPUBlocks, m.BlockSize
		b.updatedAt = now
		if !start.Before(b.ejectedAt) {
			b.failures, b.lastErr, b.ready = 0, nil, true
		}
	}
	due := err == nil && (b.modelsAt.IsZero() || !wasReady || now.Sub(b.modelsAt) >= hc.ModelsInterval)
	ready := b.ready
	g.tellLifecycle(b, wasReady)
	g.mu.Unlock()
	if err != nil {
		g.metrics.scrapeErrors.WithLabelValues(b.name).Inc()
	}
	if ready != wasReady {
		g.healthChanged(b, ready, err)
	}
	return due
}

// eject takes b out of rotation at once after a connection to it failed while proxying; the
// scrape loop re-admits it on its next good scrape.
func (g *Gateway) eject(b *backend, err error) {
	hc := g.current.Load().cfg.Health
	g.mu.Lock()
	was := b.ready
	b.ready = false
	b.failures = max(b.failures, hc.FailureThreshold)
	b.lastErr = err
	b.ejectedAt = time.Now()
	g.tellLifecycle(b, was)
	g.mu.Unlock()
	if was {
		g.healthChanged(b, false, err)
	}
}

// tellLifecycle ejects b from the gateway's lifecycles, or re-admits it, when its readiness
// changed from was: the policy of b's pool hears an ejected backend as removed, the other
// lifecycles do not know b. Gateway.mu is held, so a backend a reload just dropped is in no
// lifecycle's pool and is left alone.
func (g *Gateway) tellLifecycle(b *backend, was bool) {
	switch {
	case was && !b.ready:
		for _, l := range g.lanes {
			l.lc.Eject(b.name)
		}
		g.kvEjected(b)
	case !was && b.ready:
		for _, l := range g.lanes {
			l.lc.Readmit(b.name)
		}
	}
}

func (g *Gateway) healthChanged(b *backend, ready bool, err error) {
	if ready {
		b.healthyGauge.Set(1)
	} else {
		b.healthyGauge.Set(0)
	}
	if g.opts.OnHealth != nil {
		g.opts.OnHealth(b.name, b.url, ready, err)
	}
}

// refreshModels fetches b's /v1/models. On failure b keeps its previous list (a backend
// without the endpoint keeps an unknown list, which admits any model).
func (g *Gateway) refreshModels(ctx context.Context, b *backend, timeout time.Duration) {
	var models []openai.Model
	err := g.get(ctx, b.modelsURL, timeout, maxScrapeBytes, func(r io.Reader) error {
		body, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		models, err = openai.ParseModels(body)
		return err
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	b.modelsAt = time.Now()
	if err != nil {
		return
	}
	ids := make([]string, len(models))
	for i, m := range models {
		ids[i] = m.ID
	}
	b.models, b.modelList = ids, models
	g.rebuildModels(g.current.Load())
}
