package router_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"kvroute/router"
)

// pdTable is one file of testdata/upstream/pd: P/D decision cases, each following a rule of
// the upstream code that decides whether and where a request prefills (cited in the case).
type pdTable struct {
	Cases []pdCase `json:"cases"`
}

// pdCase replays each stage's history into a fresh router.PD (a lifecycle per pool, as the
// simulator and the proxy drive it), then has it decide Request at time At; every seed must
// give Want. docs/policies.md ("P/D cases") documents the format.
type pdCase struct {
	Name          string          `json:"name"`
	Cite          string          `json:"cite"`
	Decider       string          `json:"decider"`
	DeciderParams map[string]any  `json:"decider_params"`
	Decode        pdStage         `json:"decode"`
	Prefill       pdStage         `json:"prefill"`
	At            router.Duration `json:"at"`
	Request       caseRequest     `json:"request"`
	Want          pdWant          `json:"want"`
}

// pdStage is one pool: its policy, its endpoints and what the policy observed before the
// decision (the events of upstreamCase.History, on this pool's lifecycle).
type pdStage struct {
	Policy    string         `json:"policy"`
	Params    map[string]any `json:"params"`
	Endpoints []caseEndpoint `json:"endpoints"`
	History   []caseEvent    `json:"history"`
}

// pdWant is a P/D decision: the decode endpoint, the prefill endpoint ("" when the decode
// endpoint prefills), the decision's reason and, when set, the cached tokens the decider was
// told the decode endpoint holds.
type pdWant struct {
	Decode  string `json:"decode"`
	Prefill string `json:"prefill"`
	Reason  string `json:"reason"`
	Cached  *int   `json:"cached"`
}

// TestUpstreamPDDecisions runs every case of testdata/upstream/pd/*.json.
func TestUpstreamPDDecisions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "upstream", "pd", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no P/D tables: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tab pdTable
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&tab); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, tc := range tab.Cases {
			t.Run(filepath.Base(file)+"/"+tc.Name, func(t *testing.T) {
				if tc.Cite == "" || tc.Want.Decode == "" || tc.Want.Reason == "" {
					t.Fatalf("%s: case %q needs a cite, want.decode and want.reason", file, tc.Name)
				}
				for seed := uint64(1); seed <= 16; seed++ {
					got := runPDCase(t, tc, seed)
					if got.String() != tc.Want.String(got.Cached) {
						t.Fatalf("seed %d: %s, want %s (%s)", seed, got, tc.Want.String(got.Cached), tc.Cite)
					}
				}
			})
		}
	}
}

// pdGot is a decision as pdWant writes it.
type pdGot struct {
	Decode, Prefill, Reason string
	Cached                  int
}

func (g pdGot) String() string {
	return fmt.Sprintf("decode %s, prefill %q, reason %s, cached %d", g.Decode, g.Prefill, g.Reason, g.Cached)
}

// String writes w as pdGot writes a decision; got stands in for an unset Cached.
func (w pdWant) String(got int) string {
	cached := got
	if w.Cached != nil {
		cached = *w.Cached
	}
	return pdGot{w.Decode, w.Prefill, w.Reason, cached}.String()
}

func runPDCase(t *testing.T, tc pdCase, seed uint64) pdGot {
	t.Helper()
	reg := router.Builtin()
	dec, err := router.NewDecider(tc.Decider, tc.DeciderParams)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := reg.New(tc.Prefill.Policy, tc.Prefill.Params, seed)
	if err != nil {
		t.Fatal(err)
	}
	de, err := reg.New(tc.Decode.Policy, tc.Decode.Params, seed+1<<32)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := router.NewPD(router.PDPolicy{Prefill: unseen{}, Decode: unseen{}, Decider: dec},
		endpointStates(tc.Prefill.Endpoints), endpointStates(tc.Decode.Endpoints),
		router.LifecycleConfig{MaxRetries: router.DefaultMaxRetries})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		r  *replay
		ev []caseEvent
	}{
		{replayOn(t, de, pd.Decode, tc.Decode.Endpoints), tc.Decode.History},
		{replayOn(t, pre, pd.Prefill, tc.Prefill.Endpoints), tc.Prefill.History},
	} {
		for k, ev := range st.ev {
			if err := st.r.apply(ev); err != nil {
				t.Fatalf("%s history event %d: %v", st.r.p.Name(), k, err)
			}
		}
	}
	var tk router.PDTicket
	if err := pd.Decide(&tk, tc.Request.request(), upstreamEpoch.Add(tc.At.D())); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	got := pdGot{Decode: tk.Decode.Endpoint(), Reason: tk.Reason, Cached: tk.Cached}
	if tk.Remote {
		got.Prefill = tk.Prefill.Endpoint()
	}
	return got
}
