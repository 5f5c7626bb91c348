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
)

// upstreamTable is one file of testdata/upstream: decision cases for one policy, each
// following a rule of the upstream code the policy reproduces (cited in the case).
type upstreamTable struct {
	Policy string         `json:"policy"`
	Cases  []upstreamCase `json:"cases"`
}

// upstreamCase replays History into a fresh policy through a router.Lifecycle, as the
// simulator and the proxy drive it, then has the lifecycle decide Request at time At; every
// seed must pick Want. docs/policies.md ("Case table") documents the format.
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

// caseEndpoint is one endpoint as the router observes it. InFlight requests are in flight
// on it when the history starts, routed before this policy took over (the lifecycle counts
// them; the policy never heard of them).
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

// caseEvent is one thing the policy observes, at At. Exactly one kind is set:
//   - Request: routed to To (Lifecycle.Assign), or, with Decide, decided by the policy
//     (Lifecycle.Decide; To, when set, is what it must pick);
//   - FirstToken, Finished (with Usage), Aborted (finished with no usage) or Retry (To, when
//     set, is where the retry must go): the request with that ID;
//   - Eject, Readmit, Remove: the endpoint with that ID (Remove: SetEndpoints without it);
//   - Endpoints: the pool from now on (SetEndpoints, then each one's observed fields; a
//     change of NotReady ejects or re-admits it; InFlight is ignored);
//   - a KV event of To: Stored / Removed block hashes, StoredTokens / RemovedTokens (the
//     blocks of these token ids as the simulated engine hashes them under Model, in blocks of
//     BlockSize tokens, 16 by default), in tier Medium ("GPU" by default, or "CPU"); or
//     Cleared (AllBlocksCleared).
type caseEvent struct {
	At         router.Duration `json:"at"`
	Request    *caseRequest    `json:"request"`
	Decide     bool            `json:"decide"`
	To         string          `json:"to"`
	FirstToken string          `json:"first_token"`
	Finished   string          `json:"finished"`
	Usage      caseUsage       `json:"usage"`
	Aborted    string          `json:"aborted"`
	Retry      string          `json:"retry"`
	Eject      string          `json:"eject"`
	Readmit    string          `json:"readmit"`
	Remove     string          `json:"remove"`
	Endpoints  []caseEndpoint  `json:"endpoints"`

	Stored        []uint64 `json:"stored"`
	Removed       []uint64 `json:"removed"`
	StoredTokens  []int32  `json:"stored_tokens"`
	RemovedTokens []int32  `json:"removed_tokens"`
	Model         string   `json:"model"`
	BlockSize     int      `json:"block_size"`
	Medium        string   `json:"medium"`
	Cleared       bool     `json:"cleared"`
}

// caseUsage is router.Usage as the engine reports it in an OpenAI response's usage.
type caseUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	CompletionTokens int `json:"completion_tokens"`
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
