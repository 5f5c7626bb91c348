package emulate

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kvroute/internal/kvevents"
	"kvroute/router/prefix"
	"kvroute/workloads"
)

// heldKeys is a kvevents.Observer keeping one replica's router keys.
type heldKeys struct {
	mu sync.Mutex
	m  map[uint64]bool
}

func (h *heldKeys) BlockStored(_ string, k uint64, _ string) {
	h.mu.Lock()
	h.m[k] = true
	h.mu.Unlock()
}
func (h *heldKeys) BlockRemoved(_ string, k uint64, _ string) {
	h.mu.Lock()
	delete(h.m, k)
	h.mu.Unlock()
}
func (h *heldKeys) AllBlocksCleared(string) { h.mu.Lock(); clear(h.m); h.mu.Unlock() }

func (h *heldKeys) has(k uint64) bool { h.mu.Lock(); defer h.mu.Unlock(); return h.m[k] }
func (h *heldKeys) size() int         { h.mu.Lock(); defer h.mu.Unlock(); return len(h.m) }

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):]
}

// TestTokenizeMatchesPrefill checks /tokenize's vLLM shape and that its ids are the ones the
// completion prefills (its usage.prompt_tokens), for chat and completion bodies.
func TestTokenizeMatchesPrefill(t *testing.T) {
	_, base := startReplica(t, nil)
	c := client()
	words := workloads.Words([]int32{1, 2, 300, 4000, 5})
	for _, tc := range []struct{ name, tokBody, body, path string }{
		{"completion", `{"prompt":"` + words + `"}`, `{"prompt":"` + words + `","max_tokens":2}`, "/v1/completions"},
		{"chat", `{"messages":[{"role":"system","content":"` + words + `"},{"role":"user","content":"hello there"}],"add_generation_prompt":true}`,
			`{"messages":[{"role":"system","content":"` + words + `"},{"role":"user","content":"hello there"}],"max_tokens":2}`, "/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, c, base+"/tokenize", tc.tokBody)
			var got tokenizeResponse
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			resp.Body.Close()
			if got.Count != len(got.Tokens) || got.MaxModelLen <= 0 {
				t.Fatalf("response %+v", got)
			}
			if tc.name == "completion" && !slices.Equal(got.Tokens, []int32{1, 2, 300, 4000, 5}) {
				t.Errorf("tokens %v, want the words' ids", got.Tokens)
			}
			comp := readCompletion(t, post(t, c, base+tc.path, tc.body))
			if comp.Usage == nil || comp.Usage.PromptTokens != got.Count {
				t.Errorf("completion usage %+v, /tokenize count %d", comp.Usage, got.Count)
			}
		})
	}
	resp := post(t, c, base+"/tokenize", `{"prompt":"x","model":"nope"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown model: status %d, want 404", resp.StatusCode)
	}
}

// TestPublishesKVEvents subscribes to a replica's events over loopback ZMQ, in both
// encodings, and checks that the index built from them holds exactly the blocks of the
// prompts the replica cached, under the keys a router computes from the same tokens.
func TestPublishesKVEvents(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprint("named=", named), func(t *testing.T) {
			port := freePort(t)
			r, base := startReplica(t, func(c *Config) {
				c.KVEvents = KVEventsConfig{Endpoint: "tcp://*:" + port, NamedFields: named}
				c.NumBlocks = 64
			})
			held := &heldKeys{m: map[uint64]bool{}}
			x := kvevents.NewIndex(kvevents.DefaultIndexConfig(), kvevents.DefaultLimits(), held)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			sub := &kvevents.Subscriber{Index: x, OnError: func(err error) { t.Errorf("subscriber: %v", err) }}
			go func() { _ = sub.Run(ctx, kvevents.Source{Endpoint: "tcp://127.0.0.1:" + port, ID: "r0"}) }()
			c := client()
			ids := make([]int32, 100)
			for i := range ids {
				ids[i] = int32(i * 7 % workloads.VocabSize)
			}
			prompt := workloads.Words(ids)
			// The subscription misses what is sent before it is up: send fresh prompts until
			// one's events arrive, then the one under test.
			deadline := time.Now().Add(10 * time.Second)
			for n := 0; x.Stats().Stored == 0; n++ {
				if time.Now().After(deadline) {
					t.Fatalf("no event received: %+v", x.Stats())
				}
				warm := strings.Repeat(fmt.Sprintf("warm-up %d ", n), 10)
				readCompletion(t, post(t, c, base+"/v1/completions", `{"prompt":"`+warm+`","max_tokens":1}`))
				time.Sleep(20 * time.Millisecond)
			}
			readCompletion(t, post(t, c, base+"/v1/completions", `{"prompt":"`+prompt+`","max_tokens":1}`))
			want := prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt(r.served), ids, 16)
			waitUntil(t, func() bool { return held.has(want[len(want)-1]) })
			for _, k := range want {
				if !held.has(k) {
					t.Fatalf("block key %x of the prompt is not in the index (%d keys)", k, held.size())
				}
			}
			// Evict it: other prompts fill the 64-block cache; its keys must leave the index.
			for n := range 12 {
				other := strings.Repeat(fmt.Sprintf("filler %d ", n), 40)
				readCompletion(t, post(t, c, base+"/v1/completions", `{"prompt":"`+other+`","max_tokens":1}`))
			}
			waitUntil(t, func() bool { return !held.has(want[0]) && x.Stats().Removed > 0 })
			if got, limit := held.size(), 64; got > limit {
				t.Errorf("index holds %d keys, the cache has %d blocks", got, limit)
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
