package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
	"kvroute/internal/loadgen"
	"kvroute/internal/nettest"
	"kvroute/results"
	"kvroute/workloads"
)

// preciseSystem is emulated replicas that publish vLLM KV events, and several routers, each
// subscribed to every replica's events and tokenizing through /tokenize, behind a
// round-robin front (a load balancer spreading clients over router replicas).
type preciseSystem struct {
	routers []*gateway.Gateway
	url     string
}

// startEventReplicas starts n emulated replicas, each publishing its KV events on a socket of
// its own, with tweak (when not nil) applied to each one's configuration. It returns their
// URLs and the kv_events.connect entries that subscribe to them.
func startEventReplicas(ctx context.Context, t *testing.T, n int, tweak func(*emulate.Config)) (urls, connect []string) {
	t.Helper()
	for range n {
		cfg := emulate.DefaultConfig()
		cfg.Model, cfg.Speed, cfg.Addr = model, 1, "127.0.0.1:0"
		cfg.KVEvents = emulate.KVEventsConfig{Endpoint: "tcp://" + nettest.FreeAddr(t), Bind: true}
		if tweak != nil {
			tweak(&cfg)
		}
		r, err := emulate.NewReplica(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		u := "http://" + r.Addr()
		urls = append(urls, u)
		connect = append(connect, u+"="+cfg.KVEvents.Endpoint)
	}
	return urls, connect
}

func startPrecise(t *testing.T, policy string, replicas, routers int) *preciseSystem {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	urls, connect := startEventReplicas(ctx, t, replicas, nil)
	s := &preciseSystem{}
	var fronts []*url.URL
	for range routers {
		gcfg := gateway.DefaultConfig()
		gcfg.Policy, gcfg.Backends, gcfg.DebugHeaders = policy, urls, true
		gcfg.KVEvents.Connect = connect // precise-prefix reads token ids: the router asks /tokenize
		gw, err := gateway.New(gcfg, gateway.Options{OnKVError: func(err error) { t.Errorf("kv events: %v", err) }})
		if err != nil {
			t.Fatal(err)
		}
		go gw.Run(ctx)
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		fronts = append(fronts, u)
		s.routers = append(s.routers, gw)
	}
	var next atomic.Uint64
	lb := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(fronts[next.Add(1)%uint64(len(fronts))])
	}, FlushInterval: -1}
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close)
	s.url = front.URL
	return s
}

// TestPreciseRoutersAgreeWithSimulation runs the shared-prefix workload through two router
// replicas running precise-prefix on the emulated replicas' KV events, and through the
// simulator with the same policy: the token-weighted hit rates agree within 0.05.
func TestPreciseRoutersAgreeWithSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 6 s of real time")
	}
	const seed = 5
	s := startPrecise(t, "precise-prefix", 2, 2)
	// Wait until every router sees the replicas ready, so no request meets an empty pool.
	for _, gw := range s.routers {
		waitReady(t, gw, 2)
	}
	lm := runLive(t, s.url, selfWorkload(), seed)
	sm := simulateWith(t, "precise-prefix", seed).Metrics()
	t.Logf("live (2 routers): %d/%d completed, hit %.3f, TTFT mean %.1f ms p50 %.1f; sim: %d/%d, hit %.3f, TTFT mean %.1f ms p50 %.1f",
		lm.Completed, lm.Requests, lm.HitRate, lm.TTFT.Mean, lm.TTFT.P50, sm.Completed, sm.Requests, sm.HitRate, sm.TTFT.Mean, sm.TTFT.P50)
	if lm.Completed != 48 || sm.Completed != 48 {
		t.Fatalf("completed: live %d, sim %d, want 48", lm.Completed, sm.Completed)
	}
	if d := math.Abs(lm.HitRate - sm.HitRate); d > 0.05 {
		t.Errorf("hit rate: live %.3f, sim %.3f (|diff| %.3f > 0.05)", lm.HitRate, sm.HitRate, d)
	}
	// Both routers read the same events: their indexes agree block for block count.
	nettest.WaitFor(t, "the routers' indexes to agree", func() bool {
		a, b := scrape(t, s.routers[0]), scrape(t, s.routers[1])
		for _, be := range s.routers[0].Backends() {
			l := map[string]string{"backend": be.Name}
			if metricSum(t, a, "kvroute_gateway_kv_index_blocks", l) != metricSum(t, b, "kvroute_gateway_kv_index_blocks", l) ||
				metricSum(t, a, "kvroute_gateway_kv_index_blocks", l) == 0 {
				return false
			}
		}
		return true
	})
	for i, gw := range s.routers {
		body := scrape(t, gw)
		events := metricSum(t, body, "kvroute_gateway_kv_events_total", nil)
		asked := metricSum(t, body, "kvroute_gateway_tokenize_duration_seconds", map[string]string{"result": "miss"})
		failed := metricSum(t, body, "kvroute_gateway_tokenize_duration_seconds", map[string]string{"result": "error"})
		stale := metricSum(t, body, "kvroute_gateway_kv_index_stale", nil)
		t.Logf("router %d: %v KV events, %v /tokenize calls (mean %.2f ms), %v cache hits (mean %.3f ms), %v failed, %v stale backends",
			i, events, asked, 1e3*histMean(t, body, "miss"), metricSum(t, body, "kvroute_gateway_tokenize_duration_seconds", map[string]string{"result": "hit"}),
			1e3*histMean(t, body, "hit"), failed, stale)
		if events == 0 || asked == 0 || failed != 0 || stale != 0 {
			t.Errorf("router %d: events %v, /tokenize calls %v, failures %v, stale %v", i, events, asked, failed, stale)
		}
	}
}

// runLive replays w through url with the load generator and returns the live metrics.
func runLive(t *testing.T, url string, w workloads.Config, seed uint64) results.Metrics {
	t.Helper()
	stream, err := workloads.Build(w, seed)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	live := results.NewAggregator()
	opts := loadgen.DefaultOptions()
	opts.Target, opts.Model = url, model
	if _, err := loadgen.Run(context.Background(), opts, stream, loadgen.Sink{Result: func(r *loadgen.Result) {
		live.Add(&r.Record)
	}}); err != nil {
		t.Fatal(err)
	}
	return live.Metrics()
}

// TestManyRoutersLive measures hit rate and TTFT against the number of router replicas,
// live, for precise-prefix and prefix-score, at 1, 2, 4 and 8 routers (set KVROUTE_LIVE_ROUTERS=1;
// about a minute):
// precise-prefix keeps its hit rate within 0.05 at 4 routers, where prefix-score loses it.
func TestManyRoutersLive(t *testing.T) {
	if os.Getenv("KVROUTE_LIVE_ROUTERS") == "" {
		t.Skip("a measurement: set KVROUTE_LIVE_ROUTERS=1")
	}
	w := selfWorkload()
	w.Workload.Groups, w.Requests = 8, 64
	hit := map[string]float64{}
	for _, policy := range []string{"precise-prefix", "prefix-score"} {
		for _, n := range []int{1, 2, 4, 8} {
			s := startPrecise(t, policy, 2, n)
			for _, gw := range s.routers {
				waitReady(t, gw, 2)
			}
			m := runLive(t, s.url, w, 5)
			hit[fmt.Sprint(policy, n)] = m.HitRate
			t.Logf("live %-14s routers %d: %d/%d completed, hit %.3f, TTFT p50 %.1f ms p99 %.1f ms",
				policy, n, m.Completed, m.Requests, m.HitRate, m.TTFT.P50, m.TTFT.P99)
		}
	}
	if d := hit["precise-prefix1"] - hit["precise-prefix4"]; d > 0.05 {
		t.Errorf("precise-prefix: hit %.3f at 1 router, %.3f at 4", hit["precise-prefix1"], hit["precise-prefix4"])
	}
}

func waitReady(t *testing.T, gw *gateway.Gateway, n int) {
	t.Helper()
	nettest.WaitFor(t, "ready backends", func() bool {
		ready := 0
		for _, b := range gw.Backends() {
			if b.Ready {
				ready++
			}
		}
		return ready == n
	})
}

func scrape(t *testing.T, gw *gateway.Gateway) string {
	t.Helper()
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// metricSum returns the sum over the series of family name (a histogram's sample counts),
// parsed with Prometheus's own text parser.
func metricSum(t *testing.T, body, name string, labels map[string]string) float64 {
	t.Helper()
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	f, ok := fams[name]
	if !ok {
		return 0
	}
	sum := 0.0
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// histMean is the mean of the tokenize latency histogram's samples of result.
func histMean(t *testing.T, body, result string) float64 {
	t.Helper()
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range fams["kvroute_gateway_tokenize_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "result" && l.GetValue() == result && m.GetHistogram().GetSampleCount() > 0 {
				return m.GetHistogram().GetSampleSum() / float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return math.NaN()
}
