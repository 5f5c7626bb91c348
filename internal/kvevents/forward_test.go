package kvevents

import (
	"context"
	"strings"
	"testing"

	"kvroute/internal/nettest"
)

// Two replicas that dial (llm-d-inference-sim's --zmq-endpoint) reach two routers through
// one forwarder: each router's index sees both replicas' streams, sequence numbers included.
func TestForwarderFansOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in, out := "tcp://"+nettest.FreeAddr(t), "tcp://"+nettest.FreeAddr(t)
	f, err := NewForwarder(ctx, ForwarderConfig{Listen: in, Publish: out})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	go f.Run(ctx)
	if _, err := NewForwarder(ctx, ForwarderConfig{Listen: in, Publish: "tcp://" + nettest.FreeAddr(t)}); err == nil ||
		!strings.Contains(err.Error(), "listen "+in) {
		t.Errorf("a second forwarder on the same endpoint: err = %v, want a listen error", err)
	}
	var idx []*Index
	for range 2 {
		x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
		idx = append(idx, x)
		known := func(pod string) (string, bool) { return pod, pod == "pod1" || pod == "pod2" }
		go (&Subscriber{Index: x, Resolve: known}).Run(ctx, Source{Endpoint: out})
	}
	var pubs []*Publisher
	for _, pod := range []string{"pod1", "pod2"} {
		p, err := NewPublisher(ctx, PublisherConfig{Endpoint: in, Topic: Topic(pod, "m")})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pubs = append(pubs, p)
	}
	toks := seqTokens(0, 16)
	// Slow joiners on both hops: publish clearing batches until every index has seen both.
	nettest.WaitFor(t, "both routers to see both replicas", func() bool {
		for _, p := range pubs {
			_ = p.Publish(payload(Event{Kind: AllBlocksCleared}))
		}
		for _, x := range idx {
			if x.Stats().Cleared < 2 || x.Keys("pod1") != 0 {
				return false
			}
		}
		return true
	})
	for _, p := range pubs {
		if err := p.Publish(payload(stored([]uint64{1}, nil, toks))); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range idx {
		nettest.WaitFor(t, "the stored blocks", func() bool { return x.Keys("pod1") == 1 && x.Keys("pod2") == 1 })
		if st := x.Stale(); len(st) != 0 && x.Stats().Gaps == 0 {
			t.Errorf("router %d: stale %v without a gap", i, st)
		}
	}
	if f.Forwarded() == 0 || f.Dropped() != 0 {
		t.Errorf("forwarded %d, dropped %d", f.Forwarded(), f.Dropped())
	}
}

func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		"tcp://*:5557":        "tcp://127.0.0.1:5557",
		"tcp://0.0.0.0:5557":  "tcp://127.0.0.1:5557",
		"tcp://[::]:5557":     "tcp://127.0.0.1:5557",
		"tcp://10.0.0.1:5557": "tcp://10.0.0.1:5557",
	} {
		if got := DialAddr(in); got != want {
			t.Errorf("DialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
