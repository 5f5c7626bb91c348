package kvevents

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"kvroute/internal/nettest"
)

// bindSub runs a subscriber listening on a free port that accepts topics of pod1 only,
// with wire limits lim (zero: the defaults); it returns the index and the host:port.
func bindSub(t *testing.T, lim WireLimits) (*Index, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := nettest.FreeAddr(t)
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
	sub := &Subscriber{Index: x, Wire: lim, Resolve: func(pod string) (string, bool) { return "ep-" + pod, pod == "pod1" }}
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx, Source{Endpoint: "tcp://" + addr, Bind: true}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	nettest.WaitFor(t, "the listener", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return x, addr
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
			addr, replay := "tcp://"+nettest.FreeAddr(t), "tcp://"+nettest.FreeAddr(t)
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
			nettest.WaitFor(t, "the subscription", func() bool {
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
				nettest.WaitFor(t, "the gap", func() bool { return len(x.Stale()) == 1 })
				if got := x.Keys("ep-pod1"); got != 1 {
					t.Errorf("keys = %d, want 1", got)
				}
			} else {
				nettest.WaitFor(t, "the replayed chain", func() bool { return x.Keys("ep-pod1") == 3 })
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

// In connect mode an event belongs to the replica whose publisher was dialed, whatever its
// topic says (vLLM's default topic is empty).
func TestSubscriberConnectOwnsTopic(t *testing.T) {
	for _, topic := range []string{"", Topic("r1", "m"), "not-a-kv-topic"} {
		t.Run(fmt.Sprintf("topic=%q", topic), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := nettest.FreeAddr(t)
			pub, err := NewPublisher(ctx, PublisherConfig{Endpoint: "tcp://" + addr, Bind: true, Topic: topic})
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
			sub := &Subscriber{Index: x, Resolve: func(pod string) (string, bool) { return pod, true }}
			done := make(chan error, 1)
			go func() { done <- sub.Run(ctx, Source{Endpoint: "tcp://" + addr, ID: "r0"}) }()
			nettest.WaitFor(t, "the event under r0", func() bool {
				_ = pub.Publish(payload(stored([]uint64{1}, nil, seqTokens(0, 16))))
				return x.Keys("r0") == 1
			})
			if got := x.Keys("r1"); got != 0 {
				t.Errorf("r1 holds %d keys from r0's publisher", got)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// In bind mode only topics naming a configured replica count; the others are dropped whole
// and counted.
func TestSubscriberBindDropsUnknownTopic(t *testing.T) {
	x, addr := bindSub(t, WireLimits{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub, err := NewPublisher(ctx, PublisherConfig{Endpoint: "tcp://" + addr, Topic: Topic("evil", "m")})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	nettest.WaitFor(t, "the unknown topic's message counted as dropped", func() bool {
		_ = pub.Publish(payload(stored([]uint64{1}, nil, seqTokens(0, 16))))
		return x.Stats().Dropped > 0
	})
	if st := x.Stats(); st.Skipped != 0 || st.Events != 0 || x.Keys("ep-evil") != 0 {
		t.Errorf("an unknown topic's event reached the index: %+v, %d keys", st, x.Keys("ep-evil"))
	}
}
