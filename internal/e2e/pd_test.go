package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
	"kvroute/internal/vllm"
)

// pdLeg is a completion request as a P/D replica received it.
type pdLeg struct {
	id, prefiller string
	body          []byte
}

// pdReplica serves an emulated replica of a role behind its own listener and records the
// completion requests it receives.
type pdReplica struct {
	name string
	r    *emulate.Replica
	srv  *httptest.Server

	mu   sync.Mutex
	legs []pdLeg
}

func (p *pdReplica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if strings.HasPrefix(req.URL.Path, "/v1/") && req.Method == http.MethodPost {
		body, _ := io.ReadAll(req.Body)
		p.mu.Lock()
		p.legs = append(p.legs, pdLeg{req.Header.Get("X-Request-Id"), req.Header.Get("x-prefiller-host-port"), body})
		p.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	p.r.ServeHTTP(w, req)
}

func (p *pdReplica) received() []pdLeg {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pdLeg(nil), p.legs...)
}

// startPD starts prefill and decode replicas at speed and a router in mode in front of
// them, round-robin on both stages; it returns the replicas, the router's URL and its
// metrics registry.
func startPD(t *testing.T, mode string, prefill, decode int, speed float64) ([]*pdReplica, []*pdReplica, string, *prometheus.Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := gateway.DefaultConfig()
	cfg.Policy = "round-robin"
	cfg.PD = gateway.PDConfig{Mode: mode, Roles: map[string]string{}}
	cfg.Health.MetricsInterval, cfg.Health.MaxBackoff = time.Hour, time.Hour // no ejection by scrape: the failure rule acts
	newRole := func(role string, n int) []*pdReplica {
		var out []*pdReplica
		for i := range n {
			ecfg := emulate.DefaultConfig()
			ecfg.GPU, ecfg.Model, ecfg.Speed = "H100-SXM-80GB", model, speed
			ecfg.PD = emulate.PDConfig{Role: role, BaseLatency: 2 * time.Millisecond}
			r, err := emulate.NewReplica(ecfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			p := &pdReplica{name: fmt.Sprintf("%s-%d", role, i), r: r}
			p.srv = httptest.NewServer(p)
			t.Cleanup(func() { p.srv.Close(); r.Close() })
			cfg.Backends = append(cfg.Backends, p.name+"="+p.srv.URL)
			cfg.PD.Roles[p.name] = role
			out = append(out, p)
		}
		return out
	}
	pre, dec := newRole(emulate.RolePrefill, prefill), newRole(emulate.RoleDecode, decode)
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(cfg, gateway.Options{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	go gw.Run(ctx)
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	return pre, dec, front.URL, reg
}

// pdChat sends one chat request, body as given, and reads the whole answer.
func pdChat(url string, body []byte, stream bool) reply {
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return reply{transport: err.Error()}
	}
	defer resp.Body.Close()
	rep := reply{status: resp.StatusCode}
	if stream && resp.StatusCode == http.StatusOK {
		readStream(resp.Body, &rep)
		return rep
	}
	var out struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   usage
	}
	data, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(data, &out) == nil && len(out.Choices) > 0 {
		rep.text, rep.done, rep.completion = out.Choices[0].Message.Content, true, out.Usage.Completion
	}
	return rep
}

func pdBody(i int, stream bool) []byte {
	m := map[string]any{"model": model, "max_tokens": 6, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("request %d: %s", i, strings.Repeat("tell me more ", 30))}}}
	if stream {
		m["stream_options"] = map[string]any{"include_usage": true}
	}
	b, _ := json.Marshal(m)
	return b
}

// TestTwoStepThroughEmulatedRoles runs the router in two-step mode in front of two
// emulated prefill and two decode replicas, streamed and not: every request is answered in
// full by a decode replica; each went once to a prefill replica with exactly the body
// vLLM's toy proxy sends, and once to a decode replica with the prefill's returned params,
// both under one X-Request-Id.
func TestTwoStepThroughEmulatedRoles(t *testing.T) {
	pre, dec, url, _ := startPD(t, gateway.PDTwoStep, 2, 2, 20)
	const n = 16
	bodies := make([][]byte, n)
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		bodies[i] = pdBody(i, i%2 == 0)
		wg.Go(func() { replies[i] = pdChat(url, bodies[i], i%2 == 0) })
	}
	wg.Wait()
	for i, r := range replies {
		if r.status != http.StatusOK || !r.done || r.completion != 6 || r.errorEvent {
			t.Errorf("request %d (stream %v): %+v", i, i%2 == 0, r)
		}
	}
	prefillByID := map[string]pdLeg{}
	for _, p := range pre {
		for _, l := range p.received() {
			if _, dup := prefillByID[l.id]; dup || l.id == "" {
				t.Errorf("prefill leg id %q: empty or seen twice", l.id)
			}
			prefillByID[l.id] = l
		}
	}
	decodes := 0
	for _, d := range dec {
		for _, l := range d.received() {
			decodes++
			p, ok := prefillByID[l.id]
			if !ok {
				t.Errorf("decode leg %q has no prefill leg under its X-Request-Id", l.id)
				continue
			}
			kv, has, err := vllm.RequestKVTransfer(l.body)
			if err != nil || !has || !kv.DoRemotePrefill || kv.RemoteRequestID != l.id {
				t.Errorf("decode leg %q params %+v (%v): want the prefill answer's", l.id, kv, err)
			}
			client := withoutParams(t, l.body)
			want, _ := vllm.PrefillBody(client)
			if !bytes.Equal(p.body, want) {
				t.Errorf("prefill leg %q body\n%s\nwant\n%s", l.id, p.body, want)
			}
		}
	}
	if len(prefillByID) != n || decodes != n {
		t.Errorf("%d prefill and %d decode legs for %d requests", len(prefillByID), decodes, n)
	}
}

// withoutParams is a decode leg's body with its kv_transfer_params removed: the client's.
func withoutParams(t *testing.T, body []byte) []byte {
	t.Helper()
	i := bytes.Index(body, []byte(`,"kv_transfer_params":`))
	if i < 0 {
		t.Fatalf("no kv_transfer_params in %s", body)
	}
	return append(append([]byte(nil), body[:i]...), '}')
}

// TestTwoStepPrefillKilled kills one of two prefill replicas: the prefill legs that meet it
// are retried on the other, and every request is answered.
func TestTwoStepPrefillKilled(t *testing.T) {
	pre, _, url, reg := startPD(t, gateway.PDTwoStep, 2, 1, 20)
	pre[0].srv.Close()
	for i := range 6 {
		if r := pdChat(url, pdBody(i, i%2 == 1), i%2 == 1); r.status != http.StatusOK || !r.done {
			t.Errorf("request %d: %+v", i, r)
		}
	}
	if got := retriesOf(t, reg, pre[0].name); got < 1 {
		t.Errorf("retries from %s: %v, want at least 1", pre[0].name, got)
	}
	if len(pre[1].received()) != 6 {
		t.Errorf("the live prefill replica got %d legs, want 6", len(pre[1].received()))
	}
}

// retriesOf reads kvroute_gateway_retries_total{backend} from reg (0 when absent).
func retriesOf(t *testing.T, reg *prometheus.Registry, backend string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_gateway_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "backend" && l.GetValue() == backend {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestSidecarHeader checks sidecar mode: the decode replica alone receives the client's
// body, with x-prefiller-host-port naming a prefill replica.
func TestSidecarHeader(t *testing.T) {
	pre, dec, url, _ := startPD(t, gateway.PDSidecar, 1, 1, 20)
	body := pdBody(0, false)
	_ = pdChat(url, body, false) // the decode replica has no sidecar: it answers as aggregated
	if n := len(pre[0].received()); n != 0 {
		t.Errorf("the prefill replica got %d requests in sidecar mode", n)
	}
	legs := dec[0].received()
	if len(legs) != 1 || legs[0].prefiller != strings.TrimPrefix(pre[0].srv.URL, "http://") || !bytes.Equal(legs[0].body, body) {
		t.Errorf("decode legs %+v: want the client's body with x-prefiller-host-port %s", legs, pre[0].srv.URL)
	}
}
