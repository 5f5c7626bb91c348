package router_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/router"
	"kvroute/router/routertest"
)

// firstReady picks the first ready endpoint: decisions a test can predict.
type firstReady struct{}

func (firstReady) Name() string { return "first-ready" }

func (firstReady) Pick(_ *router.Request, s *router.Snapshot) (router.Decision, error) {
	for i, e := range s.Endpoints {
		if e.Ready {
			return router.Decision{Index: i, Reason: "first"}, nil
		}
	}
	return router.Decision{}, router.ErrNoEndpoint
}

// lifecycleStep is one event of a lifecycle script: "decide R", "first R", "finish R",
// "retry R", "eject E", "readmit E", "drop E" (SetEndpoints without E), "assign R>E" (R
// routed to E without a Pick).
type lifecycleStep struct {
	op, arg string
	wantErr error
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name       string
		maxRetries int
		steps      []lifecycleStep
		want       []string // the recorder's calls
		inFlight   map[string]int
	}{{
		name:  "decide first-token finish",
		steps: []lifecycleStep{{op: "decide", arg: "a"}, {op: "first", arg: "a"}, {op: "first", arg: "a"}, {op: "finish", arg: "a"}, {op: "finish", arg: "a"}},
		want:  []string{"pick a ep-0 first", "routed a ep-0 first", "first-token a ep-0", "finished a ep-0 {PromptTokens:10 CachedTokens:0 CompletionTokens:5}"},
	}, {
		name:     "in flight until finished",
		steps:    []lifecycleStep{{op: "decide", arg: "a"}, {op: "decide", arg: "b"}, {op: "finish", arg: "a"}},
		want:     []string{"pick a ep-0 first", "routed a ep-0 first", "pick b ep-0 first", "routed b ep-0 first", "finished a ep-0 {PromptTokens:10 CachedTokens:0 CompletionTokens:5}"},
		inFlight: map[string]int{"ep-0": 1},
	}, {
		name:       "retry moves to another endpoint",
		maxRetries: 2,
		steps:      []lifecycleStep{{op: "decide", arg: "a"}, {op: "retry", arg: "a"}, {op: "first", arg: "a"}},
		want:       []string{"pick a ep-0 first", "routed a ep-0 first", "finished a ep-0", "pick a ep-1 first", "routed a ep-1 first", "first-token a ep-1"},
		inFlight:   map[string]int{"ep-1": 1},
	}, {
		name:  "no retry with max_retries 0",
		steps: []lifecycleStep{{op: "decide", arg: "a"}, {op: "retry", arg: "a", wantErr: router.ErrRetriesExhausted}, {op: "finish", arg: "a"}},
		want:  []string{"pick a ep-0 first", "routed a ep-0 first", "finished a ep-0"},
	}, {
		name:       "retries exhausted",
		maxRetries: 1,
		steps:      []lifecycleStep{{op: "decide", arg: "a"}, {op: "retry", arg: "a"}, {op: "retry", arg: "a", wantErr: router.ErrRetriesExhausted}},
		want:       []string{"pick a ep-0 first", "routed a ep-0 first", "finished a ep-0", "pick a ep-1 first", "routed a ep-1 first", "finished a ep-1"},
	}, {
		name:       "no endpoint left to retry on",
		maxRetries: 5,
		steps:      []lifecycleStep{{op: "decide", arg: "a"}, {op: "retry", arg: "a"}, {op: "retry", arg: "a"}, {op: "retry", arg: "a", wantErr: router.ErrNoEndpoint}},
		want: []string{"pick a ep-0 first", "routed a ep-0 first", "finished a ep-0", "pick a ep-1 first", "routed a ep-1 first",
			"finished a ep-1", "pick a ep-2 first", "routed a ep-2 first", "finished a ep-2", "pick a "},
	}, {
		name:  "eject reports removal and moves decisions",
		steps: []lifecycleStep{{op: "decide", arg: "a"}, {op: "eject", arg: "ep-0"}, {op: "eject", arg: "ep-0"}, {op: "decide", arg: "b"}, {op: "finish", arg: "a"}, {op: "readmit", arg: "ep-0"}, {op: "decide", arg: "c"}},
		want: []string{"pick a ep-0 first", "routed a ep-0 first", "removed  ep-0", "pick b ep-1 first", "routed b ep-1 first",
			"finished a ep-0 {PromptTokens:10 CachedTokens:0 CompletionTokens:5}", "pick c ep-0 first", "routed c ep-0 first"},
		inFlight: map[string]int{"ep-0": 1, "ep-1": 1},
	}, {
		name:     "a removed endpoint's requests end without counts",
		steps:    []lifecycleStep{{op: "decide", arg: "a"}, {op: "drop", arg: "ep-0"}, {op: "decide", arg: "b"}, {op: "finish", arg: "a"}},
		want:     []string{"pick a ep-0 first", "routed a ep-0 first", "removed  ep-0", "pick b ep-1 first", "routed b ep-1 first", "finished a ep-0 {PromptTokens:10 CachedTokens:0 CompletionTokens:5}"},
		inFlight: map[string]int{"ep-1": 1},
	}, {
		name: "assign routes without a pick, even to an ejected endpoint",
		steps: []lifecycleStep{{op: "eject", arg: "ep-2"}, {op: "assign", arg: "a>ep-2"}, {op: "first", arg: "a"},
			{op: "assign", arg: "b>ep-9", wantErr: errAny}, {op: "decide", arg: "c"}, {op: "finish", arg: "a"}},
		want: []string{"removed  ep-2", "routed a ep-2 assigned", "first-token a ep-2", "pick c ep-0 first", "routed c ep-0 first",
			"finished a ep-2 {PromptTokens:10 CachedTokens:0 CompletionTokens:5}"},
		inFlight: map[string]int{"ep-0": 1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := routertest.NewRecorder(firstReady{})
			l, err := router.NewLifecycle(rec, routertest.Endpoints(3, routertest.Model), router.LifecycleConfig{MaxRetries: tc.maxRetries})
			if err != nil {
				t.Fatal(err)
			}
			tickets := map[string]*router.Ticket{}
			reqs := map[string]*router.Request{}
			for k, st := range tc.steps {
				if err := runStep(l, tickets, reqs, st); !errors.Is(err, st.wantErr) && (st.wantErr != errAny || err == nil) {
					t.Fatalf("step %d %s %s: err %v, want %v", k, st.op, st.arg, err, st.wantErr)
				}
			}
			var got []string
			for _, c := range rec.Calls() {
				got = append(got, c.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			for _, e := range l.Endpoints() {
				if e.InFlight != tc.inFlight[e.ID] || e.InFlightTokens != 20*tc.inFlight[e.ID] {
					t.Errorf("%s: %d in flight (%d tokens), want %d", e.ID, e.InFlight, e.InFlightTokens, tc.inFlight[e.ID])
				}
			}
		})
	}
}

// errAny stands for any error in lifecycleStep.wantErr.
var errAny = errors.New("any error")

func runStep(l *router.Lifecycle, tickets map[string]*router.Ticket, reqs map[string]*router.Request, st lifecycleStep) error {
	now := routertest.Epoch
	switch st.op {
	case "decide":
		reqs[st.arg] = &router.Request{ID: st.arg, Model: routertest.Model, InputTokens: 10, MaxOutputTokens: 10}
		tickets[st.arg] = new(router.Ticket)
		return l.Decide(tickets[st.arg], reqs[st.arg], now)
	case "assign":
		id, ep, _ := strings.Cut(st.arg, ">")
		reqs[id] = &router.Request{ID: id, Model: routertest.Model, InputTokens: 10, MaxOutputTokens: 10}
		tickets[id] = new(router.Ticket)
		return l.Assign(tickets[id], reqs[id], ep, now)
	case "first":
		tickets[st.arg].FirstToken(now)
	case "finish":
		tickets[st.arg].Finish(router.Usage{PromptTokens: 10, CompletionTokens: 5}, now)
	case "retry":
		return tickets[st.arg].Retry(now)
	case "eject":
		l.Eject(st.arg)
	case "readmit":
		l.Readmit(st.arg)
	case "drop":
		var keep []router.EndpointState
		for _, e := range l.Endpoints() {
			if e.ID != st.arg {
				keep = append(keep, e)
			}
		}
		return l.SetEndpoints(keep)
	}
	return nil
}

func TestLifecycleUpdateKeepsOwnedFields(t *testing.T) {
	l, err := router.NewLifecycle(firstReady{}, routertest.Endpoints(2, routertest.Model), router.LifecycleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var tk router.Ticket
	if err := l.Decide(&tk, &router.Request{ID: "a", Model: routertest.Model, InputTokens: 7}, routertest.Epoch); err != nil {
		t.Fatal(err)
	}
	l.Update(func(eps []router.EndpointState) {
		for i := range eps {
			eps[i].ID, eps[i].Ready, eps[i].InFlight, eps[i].InFlightTokens = "x", false, 9, 9
			eps[i].Running, eps[i].KVUsage = 4, 0.5
		}
	})
	got := l.Endpoints()
	if got[0].ID != "ep-0" || !got[0].Ready || got[0].InFlight != 1 || got[0].InFlightTokens != 7 || got[0].Running != 4 || got[0].KVUsage != 0.5 {
		t.Errorf("after Update: %+v", got[0])
	}
}

func TestLifecycleSetPolicyKeepsRoutedRequestsWithTheirPolicy(t *testing.T) {
	old, next := routertest.NewRecorder(firstReady{}), routertest.NewRecorder(firstReady{})
	l, err := router.NewLifecycle(old, routertest.Endpoints(2, routertest.Model), router.LifecycleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var a, b router.Ticket
	_ = l.Decide(&a, &router.Request{ID: "a", Model: routertest.Model}, routertest.Epoch)
	l.SetPolicy(next)
	_ = l.Decide(&b, &router.Request{ID: "b", Model: routertest.Model}, routertest.Epoch)
	a.Finish(router.Usage{}, routertest.Epoch)
	b.Finish(router.Usage{}, routertest.Epoch)
	for _, tc := range []struct {
		rec  *routertest.Recorder
		want string
	}{{old, "pick a ep-0 first|routed a ep-0 first|finished a ep-0"}, {next, "pick b ep-0 first|routed b ep-0 first|finished b ep-0"}} {
		var got []string
		for _, c := range tc.rec.Calls() {
			got = append(got, c.String())
		}
		if g := strings.Join(got, "|"); g != tc.want {
			t.Errorf("calls %q, want %q", g, tc.want)
		}
	}
}

func TestNewLifecycleRejectsBadPools(t *testing.T) {
	dup := routertest.Endpoints(2, routertest.Model)
	dup[1].ID = dup[0].ID
	blank := routertest.Endpoints(1, routertest.Model)
	blank[0].ID = ""
	for _, tc := range []struct {
		name string
		eps  []router.EndpointState
		cfg  router.LifecycleConfig
	}{{"duplicate id", dup, router.LifecycleConfig{}}, {"empty id", blank, router.LifecycleConfig{}},
		{"negative retries", routertest.Endpoints(1, routertest.Model), router.LifecycleConfig{MaxRetries: -1}}} {
		if _, err := router.NewLifecycle(firstReady{}, tc.eps, tc.cfg); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// CanRetry says what Retry will do: true while the request has retries left under
// MaxRetries, false once it used them or ended.
func TestTicketCanRetry(t *testing.T) {
	l, err := router.NewLifecycle(firstReady{}, routertest.Endpoints(4, routertest.Model), router.LifecycleConfig{MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	var tk router.Ticket
	if tk.CanRetry() {
		t.Error("an undecided ticket can retry")
	}
	_ = l.Decide(&tk, &router.Request{ID: "a", Model: routertest.Model}, routertest.Epoch)
	var got []bool
	for range 3 {
		can := tk.CanRetry()
		got = append(got, can)
		if err := tk.Retry(routertest.Epoch); (err == nil) != can {
			t.Errorf("CanRetry %v, Retry err %v", can, err)
		}
	}
	if want := []bool{true, true, false}; !slices.Equal(got, want) {
		t.Errorf("CanRetry over three failed attempts = %v, want %v", got, want)
	}
	if tk.CanRetry() {
		t.Error("an ended ticket can retry")
	}
}
