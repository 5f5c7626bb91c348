package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/results"
	"kvroute/workloads"
)

// TestLatenciesFromStream checks TTFT, ITL, TPOT and E2E against a server whose timing is
// exact in fake time: the first chunk 100 ms after the request, then one every 20 ms.
func TestLatenciesFromStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLLM{delay: 100 * time.Millisecond, gap: 20 * time.Millisecond}
		o := Options{Target: pipeTarget, Model: "m", Client: servePipe(t, f)}
		rs, _, err := collect(t, context.Background(), o, mustStream(t, sharedPrefix(3, 10, 1)))
		if err != nil {
			t.Fatal(err)
		}
		ms := time.Millisecond
		for _, r := range rs {
			rec := r.Record
			ttft, _ := rec.TTFT()
			tpot, _ := rec.TPOT()
			got := []time.Duration{ttft, tpot, rec.Finish - rec.Arrival}
			want := []time.Duration{100 * ms, 20 * ms, 160 * ms}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: TTFT, TPOT, E2E (-want +got):\n%s", rec.ID, diff)
			}
			if diff := cmp.Diff([]time.Duration{20 * ms, 20 * ms, 20 * ms}, r.ITL); diff != "" {
				t.Errorf("%s: ITL (-want +got):\n%s", rec.ID, diff)
			}
			if r.Text != "w0 w1 w2 w3 " {
				t.Errorf("%s: text %q", rec.ID, r.Text)
			}
		}
	})
}

// TestUsageAndHeaders checks token counts (from usage when reported, else counted),
// cached tokens, and the router's headers.
func TestUsageAndHeaders(t *testing.T) {
	cases := []struct {
		name                     string
		f                        *fakeLLM
		wantPrompt, wantCached   int // wantPrompt -1: the workload's token count
		wantOutput               int
		wantEndpoint, wantReason string
	}{
		{"usage reported", &fakeLLM{prompt: 123, cached: 96, answer: func(*received) []string { return []string{"a ", "b "} }},
			123, 96, 2, "", ""},
		{"usage with more tokens than chunks", &fakeLLM{prompt: 50, answer: func(*received) []string { return []string{"ab cd ef "} }},
			50, 0, 1, "", ""},
		{"no usage", &fakeLLM{noUsage: true}, -1, 0, 4, "", ""},
		{"router headers", &fakeLLM{prompt: 9, headers: map[string]string{"x-kvroute-endpoint": "http://10.0.0.2:8000", "x-kvroute-reason": "prefix"}},
			9, 0, 4, "http://10.0.0.2:8000", "prefix"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.f)
			defer srv.Close()
			cfg := sharedPrefix(3, 100, 1)
			lens := map[string]int{}
			ref := mustStream(t, cfg)
			for r, ok := ref.Next(); ok; r, ok = ref.Next() {
				lens[r.ID] = len(r.Tokens)
			}
			rs, _, err := collect(t, context.Background(), Options{Target: srv.URL, Model: "m"}, mustStream(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				rec := r.Record
				want := results.Record{ID: rec.ID, Status: results.StatusCompleted, PromptTokens: tc.wantPrompt,
					CachedTokens: tc.wantCached, OutputTokens: tc.wantOutput, Endpoint: tc.wantEndpoint, Reason: tc.wantReason}
				if tc.wantPrompt < 0 {
					want.PromptTokens = lens[rec.ID]
				}
				got := results.Record{ID: rec.ID, Status: rec.Status, PromptTokens: rec.PromptTokens, CachedTokens: rec.CachedTokens,
					OutputTokens: rec.OutputTokens, Endpoint: rec.Endpoint, Reason: rec.Reason}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("record (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestRequestBody checks what is sent: a streamed chat completion with the workload's
// messages, or a completion with token ids when the stream carries no text.
func TestRequestBody(t *testing.T) {
	mix := workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindMix, Tenants: []workloads.TenantConfig{
			{Name: "acme", Workload: sharedPrefix(0, 1, 2).Workload},
		}},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessConstant, Rate: 100},
		Requests: 4,
	}
	cases := []struct {
		name     string
		cfg      workloads.Config
		opts     []workloads.Option
		wantPath string
		wantUser string
	}{
		{"chat with tenant and session", mix, nil, ChatPath, "acme"},
		{"completion from token ids", sharedPrefix(2, 100, 1), []workloads.Option{workloads.WithText(false)}, CompletionPath, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLLM{}
			srv := httptest.NewServer(f)
			defer srv.Close()
			rs, _, err := collect(t, context.Background(), Options{Target: srv.URL, Model: "llama"}, mustStream(t, tc.cfg, tc.opts...))
			if err != nil {
				t.Fatal(err)
			}
			sessions := map[string]bool{}
			for _, r := range rs {
				if r.Record.Status != results.StatusCompleted {
					t.Fatalf("%s: %s %s", r.Record.ID, r.Record.Status, r.Record.Error)
				}
				sessions[r.Record.Session] = true
			}
			for _, rc := range f.requests() {
				got := map[string]any{"path": rc.path, "model": rc.raw["model"], "max_tokens": rc.raw["max_tokens"],
					"ignore_eos": rc.raw["ignore_eos"], "stream": rc.raw["stream"], "include_usage": rc.req.IncludeUsage,
					"user": rc.req.User, "known session": sessions[rc.header.Get(HeaderSession)]}
				want := map[string]any{"path": tc.wantPath, "model": "llama", "max_tokens": 4.0, "ignore_eos": true,
					"stream": true, "include_usage": true, "user": tc.wantUser, "known session": true}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				if tc.wantPath == CompletionPath && len(rc.req.PromptTokens) == 0 {
					t.Error("completion prompt carries no token ids")
				}
			}
		})
	}
}

// TestEngineTTFTHeader checks how the engine-side TTFT header is read: seconds, and 0 for
// anything absent or unreasonable.
func TestEngineTTFTHeader(t *testing.T) {
	cases := []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"0.013412", 13412 * time.Microsecond},
		{"2", 2 * time.Second},
		{"-0.5", 0},
		{"NaN", 0},
		{"1e300", 0},
		{"fast", 0},
	}
	for _, tc := range cases {
		h := http.Header{}
		if tc.value != "" {
			h.Set(HeaderEngineTTFT, tc.value)
		}
		if got := engineTTFT(h); got != tc.want {
			t.Errorf("%q: got %v, want %v", tc.value, got, tc.want)
		}
	}
}
