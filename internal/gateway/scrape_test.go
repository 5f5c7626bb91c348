package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"kvroute/internal/vllm"
)

// scriptedBackend is an in-memory transport whose /metrics answers are decided by the test,
// one probe at a time.
type scriptedBackend struct {
	probes chan probeCall
}

type probeCall struct {
	at    time.Time
	reply chan int // the running count to report, or -1 to fail
}

func (s *scriptedBackend) RoundTrip(r *http.Request) (*http.Response, error) {
	body := `{"object":"list","data":[{"id":"m","object":"model"}]}`
	if r.URL.Path == "/metrics" {
		c := probeCall{at: time.Now(), reply: make(chan int)}
		s.probes <- c
		running := <-c.reply
		if running < 0 {
			return nil, io.ErrUnexpectedEOF
		}
		var buf bytes.Buffer
		_ = vllm.Write(&buf, []vllm.Engine{{Model: "m", Running: running, KVUsage: 0.5, NumGPUBlocks: 100}})
		body = buf.String()
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}, Request: r}, nil
}

// TestScrapeLoopBackoff drives the scrape loop in virtual time: a backend is scraped every
// interval, ejected after FailureThreshold failures, probed with doubling intervals up to
// MaxBackoff while down, and re-admitted on its first good scrape.
func TestScrapeLoopBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sb := &scriptedBackend{probes: make(chan probeCall)}
		type event struct {
			at    time.Duration
			ready bool
		}
		var health []event
		t0 := time.Now()
		cfg := DefaultConfig()
		cfg.Backends = []string{"http://backend:8000"}
		cfg.Health = HealthConfig{MetricsInterval: 50 * time.Millisecond, ScrapeTimeout: time.Second,
			FailureThreshold: 3, MaxBackoff: 400 * time.Millisecond, ModelsInterval: time.Hour}
		g, err := New(cfg, Options{Transport: sb, OnHealth: func(_, _ string, ready bool, _ error) {
			health = append(health, event{time.Since(t0), ready})
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { _ = g.Run(ctx); close(ran) }()

		ms := time.Millisecond
		script := []struct {
			at      time.Duration
			running int
		}{
			{0, 2}, {50 * ms, 3}, {100 * ms, 4}, // up
			{150 * ms, -1}, {200 * ms, -1}, {250 * ms, -1}, // the third failure ejects
			{300 * ms, -1}, {400 * ms, -1}, {600 * ms, -1}, {1000 * ms, -1}, {1400 * ms, -1}, // 50, 100, 200, 400, 400
			{1800 * ms, 7}, // re-admitted
			{1850 * ms, 8}, // back to the scrape interval
		}
		for i, step := range script {
			c := <-sb.probes
			if got := c.at.Sub(t0); got != step.at {
				t.Errorf("probe %d at %v, want %v", i, got, step.at)
			}
			c.reply <- step.running
		}
		synctest.Wait()
		want := []event{{250 * ms, false}, {1800 * ms, true}}
		if len(health) != len(want) || health[0] != want[0] || health[1] != want[1] {
			t.Errorf("health events %v, want %v", health, want)
		}
		b := g.Backends()[0]
		if !b.Ready || b.Running != 8 || b.KVUsage != 0.5 || b.NumGPUBlocks != 100 || b.UpdatedAt.Sub(t0) != 1850*ms || strings.Join(b.Models, ",") != "m" {
			t.Errorf("backend status %+v", b)
		}
		cancel()
		<-ran
	})
}
