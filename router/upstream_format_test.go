package router_test

import (
	"testing"

	"kvroute/router"
)

// TestCaseEvents checks that each kind of history event of the case table reaches the
// lifecycle: least-request picks the endpoint with the fewest requests, so each case's pick
// follows only from what the events did to the counters and the pool.
func TestCaseEvents(t *testing.T) {
	two := []caseEndpoint{{ID: "a"}, {ID: "b"}}
	req := func(id string) *caseRequest { return &caseRequest{ID: id, Model: "m"} }
	tests := []struct {
		name    string
		eps     []caseEndpoint
		history []caseEvent
		want    string
	}{
		{"assigned request is in flight", two, []caseEvent{{Request: req("r1"), To: "a"}}, "b"},
		{"in_flight counts", []caseEndpoint{{ID: "a", InFlight: 2}, {ID: "b", InFlight: 1}}, nil, "b"},
		{"finished releases", two, []caseEvent{
			{Request: req("r1"), To: "a"}, {Request: req("r2"), To: "b"}, {Request: req("r3"), To: "b"},
			{Finished: "r2", To: "b", Usage: caseUsage{CompletionTokens: 5}}, {Finished: "r3"}}, "b"},
		{"aborted releases", two, []caseEvent{
			{Request: req("r1"), To: "a"}, {Request: req("r2"), To: "b"}, {Request: req("r3"), To: "b"},
			{Aborted: "r2"}, {FirstToken: "r3"}, {Aborted: "r3"}}, "b"},
		{"decided requests", []caseEndpoint{{ID: "a", Running: 3}, {ID: "b"}}, []caseEvent{
			{Request: req("r1"), Decide: true, To: "b"}, {Request: req("r2"), Decide: true, To: "b"}}, "b"},
		{"retry leaves the failed endpoint", two, []caseEvent{
			{Request: req("r1"), To: "a"}, {Retry: "r1", To: "b"}}, "a"},
		{"eject", two, []caseEvent{{Request: req("r1"), To: "a"}, {Eject: "b"}}, "a"},
		{"readmit", two, []caseEvent{{Eject: "b"}, {Request: req("r1"), To: "a"}, {Readmit: "b"}}, "b"},
		{"remove", two, []caseEvent{{Request: req("r1"), To: "a"}, {Remove: "b"}}, "a"},
		{"endpoints replace the observed fields", two, []caseEvent{
			{Endpoints: []caseEndpoint{{ID: "a", Waiting: 4}, {ID: "b", Running: 3}, {ID: "c", NotReady: true}}}}, "b"},
		{"endpoints eject and re-admit", two, []caseEvent{
			{Request: req("r1"), To: "b"},
			{Endpoints: []caseEndpoint{{ID: "a", NotReady: true}, {ID: "b"}}},
			{Endpoints: []caseEndpoint{{ID: "a"}, {ID: "b"}}}}, "a"},
	}
	reg := router.Builtin()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := reg.New("least-request", nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			c := upstreamCase{Endpoints: tc.eps, History: tc.history, Request: *req("last")}
			if got := runCase(t, p, c); got != tc.want {
				t.Errorf("picked %s, want %s", got, tc.want)
			}
		})
	}
}
