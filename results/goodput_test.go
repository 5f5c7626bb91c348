package results

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestSLOMet(t *testing.T) {
	// TTFT 200 ms, TPOT 50 ms, E2E 700 ms unless a case changes it.
	base := Record{Status: StatusCompleted, Arrival: time.Second, FirstToken: time.Second + 200*ms, Finish: time.Second + 700*ms, OutputTokens: 11}
	cases := []struct {
		name string
		slo  SLO
		edit func(*Record)
		want bool
	}{
		{"no objective", SLO{}, nil, true},
		{"ttft met at the limit", SLO{TTFTMs: 200}, nil, true},
		{"ttft missed", SLO{TTFTMs: 199.9}, nil, false},
		{"tpot met", SLO{TPOTMs: 50}, nil, true},
		{"tpot missed", SLO{TPOTMs: 49}, nil, false},
		{"one token has tpot 0", SLO{TPOTMs: 1}, func(r *Record) { r.OutputTokens = 1 }, true},
		{"e2e missed", SLO{E2EMs: 600}, nil, false},
		{"all met", SLO{TTFTMs: 300, TPOTMs: 60, E2EMs: 800}, nil, true},
		{"one of three missed", SLO{TTFTMs: 300, TPOTMs: 40, E2EMs: 800}, nil, false},
		{"failed never counts", SLO{E2EMs: 1e9}, func(r *Record) { r.Status = StatusFailed }, false},
		{"rejected never counts", SLO{}, func(r *Record) { r.Status = StatusRejected }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			if tc.edit != nil {
				tc.edit(&r)
			}
			if got := tc.slo.Met(&r); got != tc.want {
				t.Errorf("Met = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAggregatorGoodput(t *testing.T) {
	a := NewAggregator()
	a.SetSLO(SLO{TTFTMs: 150})
	a.Add(&Record{Status: StatusCompleted, Arrival: 0, FirstToken: 100 * ms, Finish: 1000 * ms, OutputTokens: 10})
	a.Add(&Record{Status: StatusCompleted, Arrival: 0, FirstToken: 200 * ms, Finish: 1000 * ms, OutputTokens: 10})
	a.Add(&Record{Status: StatusCompleted, Arrival: 1000 * ms, FirstToken: 1100 * ms, Finish: 2000 * ms, OutputTokens: 10})
	a.Add(&Record{Status: StatusTimedOut, Arrival: 1000 * ms, Finish: 2000 * ms})
	g := a.Metrics().Goodput
	if g == nil {
		t.Fatal("no goodput with an SLO set")
	}
	if g.Good != 2 || g.Fraction != 0.5 || math.Abs(g.RPS-1) > 1e-12 {
		t.Errorf("goodput %+v, want 2 good, fraction 0.5, 1 req/s", *g)
	}
	if NewAggregator().Metrics().Goodput != nil {
		t.Error("goodput without an SLO")
	}
}

func TestParseSLO(t *testing.T) {
	cases := []struct {
		in      string
		want    SLO
		wantErr string
	}{
		{"", SLO{}, ""},
		{"ttft:500 tpot:50", SLO{TTFTMs: 500, TPOTMs: 50}, ""},
		{"ttft:500,e2el:3000", SLO{TTFTMs: 500, E2EMs: 3000}, ""},
		{"E2E:1.5", SLO{E2EMs: 1.5}, ""},
		{"ttft", SLO{}, "want KEY:MS"},
		{"ttft:-1", SLO{}, "not a positive number"},
		{"ttft:abc", SLO{}, "not a positive number"},
		{"itl:5", SLO{}, "unknown metric"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSLO(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "results: ") {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseSLO = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestSLOValidate(t *testing.T) {
	if err := (SLO{TTFTMs: 10}).Validate(); err != nil {
		t.Errorf("valid SLO: %v", err)
	}
	err := (SLO{TTFTMs: -1, TPOTMs: math.NaN(), E2EMs: math.Inf(1)}).Validate()
	for _, k := range []string{"ttft", "tpot", "e2el"} {
		if err == nil || !strings.Contains(err.Error(), "slo "+k) {
			t.Errorf("error %v does not name %s", err, k)
		}
	}
}
