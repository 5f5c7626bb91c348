package kvevents

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor polls cond (the subscriber runs in its own goroutine over real sockets).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParseTopic(t *testing.T) {
	for _, tc := range []struct{ topic, pod, model string }{
		{"kv@10.0.0.1@meta-llama/Llama-3.1-8B", "10.0.0.1", "meta-llama/Llama-3.1-8B"},
		{"kv@127.0.0.1:8001@fake-model", "127.0.0.1:8001", "fake-model"},
		{"kv@@m", "", ""},
		{"other@p@m", "", ""},
	} {
		pod, model, _ := ParseTopic(tc.topic)
		if pod != tc.pod || model != tc.model {
			t.Errorf("%q: got %q %q, want %q %q", tc.topic, pod, model, tc.pod, tc.model)
		}
	}
}

// A publisher and subscriber over loopback TCP, in both topologies, with a lost message
// recovered through the replay ROUTER.
func TestSubscriberOverZMQ(t *testing.T) {
	for _, bind := range []bool{false, true} {
		t.Run(fmt.Sprintf("bind=%v", bind), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr, replay := "tcp://"+freeAddr(t), "tcp://"+freeAddr(t)
			rec := newRecorder()
			x := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec)
			sub := &Subscriber{Index: x, Resolve: func(pod string) (string, bool) { return "ep-" + pod, pod == "pod1" }}
			src := Source{Endpoint: addr, Bind: bind}
			pcfg := PublisherConfig{Endpoint: addr, Topic: Topic("pod1", "m"), Replay: replay, Buffer: 4}
			if !bind {
				src.Replay = replay
				pcfg.Endpoint = "tcp://*:" + addr[len("tcp://127.0.0.1:"):]
			}
			var pub *Publisher
			var err error
			if !bind { // the replica's publisher binds first; the router dials it
				if pub, err = NewPublisher(ctx, pcfg); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- sub.Run(ctx, src) }()
			if bind {
				time.Sleep(50 * time.Millisecond) // let the subscriber listen
				if pub, err = NewPublisher(ctx, pcfg); err != nil {
					t.Fatal(err)
				}
			}
			defer pub.Close()
			toks := seqTokens(0, 48)
			p1, p2 := uint64(1), uint64(2)
			// A slow joiner misses what is sent before the subscription is up: publish a
			// clearing batch until it is seen (seq numbers advance as in vLLM).
			waitFor(t, "the subscription", func() bool {
				_ = pub.Publish(payload(Event{Kind: AllBlocksCleared}))
				return x.Stats().Cleared > 0
			})
			if err := pub.Publish(payload(stored([]uint64{1}, nil, toks[:16]))); err != nil {
				t.Fatal(err)
			}
			pub.Skip(payload(stored([]uint64{2}, &p1, toks[16:32]))) // lost on the wire
			if err := pub.Publish(payload(stored([]uint64{3}, &p2, toks[32:48]))); err != nil {
				t.Fatal(err)
			}
			if bind { // no replay endpoint: the block after the gap has no known parent
				waitFor(t, "the gap", func() bool { return len(x.Stale()) == 1 })
				if got := x.Keys("ep-pod1"); got != 1 {
					t.Errorf("keys = %d, want 1", got)
				}
			} else {
				waitFor(t, "the replayed chain", func() bool { return x.Keys("ep-pod1") == 3 })
				if st := x.Stale(); len(st) != 0 {
					t.Errorf("stale after a replay: %v", st)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
