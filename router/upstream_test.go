package router_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kvroute/router"
	"kvroute/router/prefix"
)

// upstreamTable is one file of testdata/upstream: decision cases for one policy, each
// following a rule of the upstream code the policy reproduces (cited in the case).
type upstreamTable struct {
	Policy string         `json:"policy"`
	Cases  []upstreamCase `json:"cases"`
}

// upstreamCase replays a history of routed and finished requests into a fresh policy, then
// asks it to route Request at time At; every seed must pick Want.
type upstreamCase struct {
	Name      string          `json:"name"`
	Cite      string          `json:"cite"`
	Params    map[string]any  `json:"params"`
	Endpoints []caseEndpoint  `json:"endpoints"`
	History   []caseEvent     `json:"history"`
	At        router.Duration `json:"at"`
	Request   caseRequest     `json:"request"`
	Want      string          `json:"want"`
	// WantAny, instead of Want, is a set every seed's pick must fall in and every member of
	// which some seed must pick: upstream chooses among them in an order it does not define
	// (a hash map's), which kvroute draws at random.
	WantAny []string `json:"want_any"`
}

type caseEndpoint struct {
	ID           string   `json:"id"`
	NotReady     bool     `json:"not_ready"`
	Models       []string `json:"models"`
	Running      int      `json:"running"`
	Waiting      int      `json:"waiting"`
	KVUsage      float64  `json:"kv_usage"`
	InFlight     int      `json:"in_flight"`
	NumGPUBlocks int      `json:"num_gpu_blocks"`
	BlockSize    int      `json:"block_size"`
}

// caseEvent is Routed (Request sent to To) or, when Finished is set, Finished (the request
// with that ID ended on To with Usage). KV events (Stored / Removed block hashes) go to
// policies that read the replicas' caches.
type caseEvent struct {
	At       router.Duration `json:"at"`
	Request  *caseRequest    `json:"request"`
	Finished string          `json:"finished"`
	To       string          `json:"to"`
	Usage    router.Usage    `json:"usage"`
	Stored   []uint64        `json:"stored"`
	// StoredTokens stores, on To, the blocks of these token ids under Model as the simulated
	// engine hashes them (prefix.AppendTokenBlockHashes, 16-token blocks, no adapter).
	StoredTokens []int32  `json:"stored_tokens"`
	Model        string   `json:"model"`
	Removed      []uint64 `json:"removed"`
}

type caseRequest struct {
	ID              string           `json:"id"`
	Model           string           `json:"model"`
	Adapter         string           `json:"adapter"`
	Tenant          string           `json:"tenant"`
	SessionKey      string           `json:"session_key"`
	Prompt          string           `json:"prompt"`
	Repeat          int              `json:"repeat"` // Prompt repeated this many times, when > 0
	Messages        []router.Message `json:"messages"`
	Tokens          []int32          `json:"tokens"`
	InputTokens     int              `json:"input_tokens"`
	MaxOutputTokens int              `json:"max_output_tokens"`
	Body            string           `json:"body"` // the client's JSON body, as the proxy passes it
}

func (c caseRequest) request() *router.Request {
	prompt := c.Prompt
	if c.Repeat > 0 {
		prompt = strings.Repeat(prompt, c.Repeat)
	}
	if prompt == "" && len(c.Messages) > 0 { // flattened as the proxy and simulator do
		parts := make([]string, len(c.Messages))
		for i, m := range c.Messages {
			parts[i] = m.Content
		}
		prompt = strings.Join(parts, " ")
	}
	return &router.Request{
		ID: c.ID, Model: c.Model, Adapter: c.Adapter, Tenant: c.Tenant, SessionKey: c.SessionKey,
		Prompt: prompt, Messages: c.Messages, Tokens: c.Tokens, InputTokens: c.InputTokens,
		MaxOutputTokens: c.MaxOutputTokens, Body: body(c.Body),
	}
}

func body(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

var upstreamEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestUpstreamDecisions runs every case of testdata/upstream/*.json against the policy built
// from the registry with the case's parameters.
func TestUpstreamDecisions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "upstream", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no upstream tables: %v", err)
	}
	reg := router.Builtin()
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tab upstreamTable
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tab); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, tc := range tab.Cases {
			t.Run(tab.Policy+"/"+tc.Name, func(t *testing.T) {
				if tc.Cite == "" || (tc.Want == "") == (len(tc.WantAny) == 0) {
					t.Fatalf("%s: case %q needs a cite and one of want, want_any", file, tc.Name)
				}
				want := tc.WantAny
				if tc.Want != "" {
					want = []string{tc.Want}
				}
				seen := map[string]bool{}
				for seed := uint64(1); seed <= 16; seed++ {
					p, err := reg.New(tab.Policy, tc.Params, seed)
					if err != nil {
						t.Fatal(err)
					}
					got := runCase(t, p, tc)
					if !slices.Contains(want, got) {
						t.Fatalf("seed %d: picked %s, want %v (%s)", seed, got, want, tc.Cite)
					}
					seen[got] = true
				}
				if len(seen) != len(want) {
					t.Fatalf("picked only %v over 16 seeds, want every one of %v (%s)", seen, want, tc.Cite)
				}
			})
		}
	}
}

func runCase(t *testing.T, p router.Policy, tc upstreamCase) string {
	t.Helper()
	eps := make([]router.EndpointState, len(tc.Endpoints))
	for i, e := range tc.Endpoints {
		eps[i] = router.EndpointState{
			ID: e.ID, Ready: !e.NotReady, Models: e.Models, Running: e.Running, Waiting: e.Waiting,
			KVUsage: e.KVUsage, InFlight: e.InFlight, NumGPUBlocks: e.NumGPUBlocks, BlockSize: e.BlockSize,
			UpdatedAt: upstreamEpoch,
		}
	}
	obs, _ := p.(router.Observer)
	kv, _ := p.(router.KVEventObserver)
	routed := map[string]*router.Request{}
	for _, ev := range tc.History {
		now := upstreamEpoch.Add(ev.At.D())
		switch {
		case ev.Request != nil && obs != nil:
			r := ev.Request.request()
			routed[r.ID] = r
			obs.Routed(r, router.Decision{}, ev.To, now)
		case ev.Finished != "" && obs != nil:
			obs.Finished(routed[ev.Finished], ev.To, ev.Usage, now)
		case len(ev.Stored)+len(ev.Removed)+len(ev.StoredTokens) > 0 && kv != nil:
			stored := prefix.AppendTokenBlockHashes(ev.Stored, prefix.ModelSalt(ev.Model), ev.StoredTokens, 16)
			for _, h := range stored {
				kv.BlockStored(ev.To, h)
			}
			for _, h := range ev.Removed {
				kv.BlockRemoved(ev.To, h)
			}
		default:
			t.Fatalf("history event %+v: nothing to replay into %s", ev, p.Name())
		}
	}
	s := &router.Snapshot{Now: upstreamEpoch.Add(tc.At.D()), Endpoints: eps}
	d, err := p.Pick(tc.Request.request(), s)
	if err != nil {
		t.Fatalf("Pick: %v", err)
	}
	return eps[d.Index].ID
}
