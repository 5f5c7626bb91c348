package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
	"kvroute/internal/nettest"
	"kvroute/sim/engine"
)

// tierText is a prompt of n bytes (n/4 tokens to the emulator's tokenizer) that shares no
// block with another tag's.
func tierText(tag string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s-%05d ", tag, i)
	}
	return b.String()[:n]
}

// TestPreciseRoutesToCPUTier runs two emulated replicas with a GPU KV of 64 blocks and a CPU
// offload tier, and a router running precise-prefix on their KV events. Each replica is sent a
// prompt of its own directly, then enough other prompts that the GPU evicts it: it is held
// only in that replica's CPU tier. Routed through the router, each prompt goes to the replica
// holding it in CPU, and loads it from there. The replicas are idle and alike when the two
// prompts are routed, so load alone picks no replica for a prompt; and the two prompts go to
// different replicas, so no single choice passes.
func TestPreciseRoutesToCPUTier(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real-time replicas")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	urls, connect := startEventReplicas(ctx, t, 2, func(cfg *emulate.Config) {
		cfg.NumBlocks = 64                                 // 1,024 tokens: a few prompts evict the first
		cfg.Offload = engine.OffloadConfig{Bytes: 1 << 30} // about 500 blocks of 2 MB
	})
	gcfg := gateway.DefaultConfig()
	gcfg.Policy, gcfg.Backends, gcfg.DebugHeaders = "precise-prefix", urls, true
	gcfg.KVEvents.Connect = connect
	gw, err := gateway.New(gcfg, gateway.Options{OnKVError: func(err error) { t.Errorf("kv events: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	go gw.Run(ctx)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	waitReady(t, gw, 2)
	names := map[string]string{}
	for _, b := range gw.Backends() {
		names[b.URL] = b.Name
	}

	// ZMQ subscribers miss what is published before they connect: warm each replica up until
	// the router's index holds blocks of it.
	for i, u := range urls {
		try := 0
		nettest.WaitFor(t, "the router to hear replica events", func() bool {
			try++ // a new prompt each time: a cached one publishes nothing
			chat(t, u, []map[string]string{{"role": "user", "content": tierText(fmt.Sprintf("warm%d.%d", i, try), 256)}}, false, 1)
			return metricSum(t, scrape(t, gw), "kvroute_gateway_kv_index_blocks", map[string]string{"backend": names[u]}) > 0
		})
	}

	prompts := []string{tierText("alpha", 1280), tierText("bravo", 1280)} // 320 tokens: 20 blocks
	for i, u := range urls {
		send := func(text string) {
			if rep := chat(t, u, []map[string]string{{"role": "user", "content": text}}, false, 1); !rep.done {
				t.Fatalf("replica %d: %+v", i, rep)
			}
		}
		send(prompts[i])
		for k := range 3 { // 3 × 600 tokens: more than the GPU holds, so the prompt is evicted
			send(tierText(fmt.Sprintf("fill%d%d", i, k), 2400))
		}
	}
	// The router has heard every replica's events once its event count stops moving.
	prev := -1.0
	nettest.WaitFor(t, "the KV events to settle", func() bool {
		n := metricSum(t, scrape(t, gw), "kvroute_gateway_kv_events_total", nil)
		settled := n > 0 && n == prev
		prev = n
		time.Sleep(100 * time.Millisecond)
		return settled
	})

	for i, text := range prompts {
		var got string
		rep := chatHead(t, srv.URL, []map[string]string{{"role": "user", "content": text}}, false, 1, func(r *http.Response) {
			got = r.Header.Get("X-Kvroute-Endpoint")
		})
		if !rep.done {
			t.Fatalf("prompt %d through the router: %+v", i, rep)
		}
		if want := names[urls[i]]; got != want {
			t.Errorf("prompt %d held in %s's CPU tier went to %q", i, want, got)
		}
		if rep.cached == 0 {
			t.Errorf("prompt %d: no cached tokens: not loaded from the CPU tier", i)
		}
	}
	for i, u := range urls { // each replica loaded its prompt back from CPU
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		page, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		loaded := metricSum(t, string(page), "vllm:kv_offload_total_bytes_total", map[string]string{"transfer_type": "CPU_to_GPU"})
		if loaded == 0 {
			t.Errorf("replica %d loaded nothing from its CPU tier", i)
		}
	}
}
