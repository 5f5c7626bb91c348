package routertest

import (
	"fmt"
	"time"

	"kvroute/router"
)

// LifecycleScript is the lifecycle conformance suite's script: requests sent one at a time,
// each once the one before has ended, with failed attempts, an endpoint killed and revived.
// A driver (the simulator's, the proxy's) runs it through its own router.Lifecycle with a
// Recorder around the policy; ReferenceCalls says what the recorder must then hold.
type LifecycleScript struct {
	// Requests are sent in order.
	Requests []router.Request
	// Reset holds the positions of the requests whose first attempt fails before any byte of
	// its response reached the client (its endpoint closes the connection unanswered): the
	// request is tried on another endpoint.
	Reset map[int]bool
	// Kill is the position of the request after whose end the endpoint it ended on stops
	// answering; the driver goes on once its router has ejected the endpoint. -1: none.
	Kill int
	// Revive is the position of the request after whose end the killed endpoint answers
	// again; the driver goes on once its router has re-admitted it. -1: none.
	Revive int
}

// StandardScript returns the suite's script over reqs (at least 12 of them): the first
// attempts of requests 3 and 10 are reset, the endpoint of request 5 is killed after it and
// revived after request 8.
func StandardScript(reqs []router.Request) LifecycleScript {
	if len(reqs) < 12 {
		panic(fmt.Sprintf("routertest: the standard script needs 12 requests, got %d", len(reqs)))
	}
	return LifecycleScript{Requests: reqs, Reset: map[int]bool{3: true, 10: true}, Kill: 5, Revive: 8}
}

// ScriptUsage is the usage a script's request finishes with: its prompt and requested
// output, in full (drivers' cached tokens are not compared).
func ScriptUsage(r *router.Request) router.Usage {
	return router.Usage{PromptTokens: r.InputTokens, CompletionTokens: r.MaxOutputTokens}
}

// ReferenceCalls runs s through a Lifecycle driven directly, with policy p (wrapped in a
// Recorder) over endpoints eps as an idle fleet shows them, and returns the recorded calls:
// what every driver's recorder must hold.
func ReferenceCalls(p router.Policy, eps []router.EndpointState, s LifecycleScript, maxRetries int) ([]Call, error) {
	rec := NewRecorder(p)
	l, err := router.NewLifecycle(rec, eps, router.LifecycleConfig{MaxRetries: maxRetries})
	if err != nil {
		return nil, err
	}
	killed := ""
	for k := range s.Requests {
		now := Epoch.Add(time.Duration(k) * time.Second)
		var t router.Ticket
		if err := l.Decide(&t, &s.Requests[k], now); err != nil {
			return nil, fmt.Errorf("request %d: %w", k, err)
		}
		if s.Reset[k] {
			if err := t.Retry(now); err != nil {
				return nil, fmt.Errorf("request %d: retry: %w", k, err)
			}
		}
		t.FirstToken(now)
		t.Finish(ScriptUsage(&s.Requests[k]), now)
		switch k {
		case s.Kill:
			killed = t.Endpoint()
			l.Eject(killed)
		case s.Revive:
			l.Readmit(killed)
		}
	}
	return rec.Calls(), nil
}

// CanonicalCalls renders calls for comparison between drivers: request IDs become r0, r1, …
// in order of first appearance (each driver names requests its own way), and cached tokens
// are dropped (they are the engine's, not the lifecycle's).
func CanonicalCalls(calls []Call) []string {
	ids := map[string]string{}
	out := make([]string, len(calls))
	for i, c := range calls {
		if c.Request != "" {
			if _, ok := ids[c.Request]; !ok {
				ids[c.Request] = fmt.Sprintf("r%d", len(ids))
			}
			c.Request = ids[c.Request]
		}
		c.Usage.CachedTokens = 0
		out[i] = c.String()
	}
	return out
}

// ConformanceParams returns, per built-in policy, the parameters the suite builds it with:
// none, except expiry times long enough that wall time, which drivers spend differently,
// never changes a decision.
func ConformanceParams(policy string) map[string]any {
	switch policy {
	case "precise-prefix":
		return map[string]any{"speculative_ttl": "1h"}
	case "predicted-ttft":
		return map[string]any{"route_ttl": "1h"}
	}
	return nil
}
