// Package gateway is kvroute's live proxy: an OpenAI-compatible HTTP handler that routes each
// chat or completion request to one of several vLLM (or SGLang) backends with a router.Policy,
// and forwards the original request bytes unchanged.
//
// The Gateway feeds the policy two kinds of load signal. Each backend's Prometheus /metrics
// page is scraped on a short interval (running and waiting requests, KV-cache usage, KV
// capacity), and the gateway keeps its own in-flight counters per backend. A counter is
// reserved when a decision is made, under the same lock that builds the decision's snapshot,
// and released exactly once when the response ends, the client goes away or the backend
// fails: the Reserve/Unreserve discipline of the Kubernetes scheduler, with an idempotent
// release, so counters cannot leak or underflow.
//
// Scrapes double as health checks: consecutive failures eject a backend (Ready=false), an
// ejected backend is probed with exponential backoff and re-admitted on its first good scrape,
// and a connection refused while proxying ejects it at once. A request that fails before any
// byte reached the client is retried on another backend; a stream that breaks later ends with
// an OpenAI-style error event. The gateway counts what it does in Prometheus metrics registered
// on a registry the caller passes in.
//
// The proxy path is built for low overhead per request, since the gateway sits in front of
// every completion. Requests go to backends over the gateway's own pools of keep-alive
// HTTP/1.1 connections (upstream.go, exchange.go): the handler's goroutine writes the request
// in one write and reads the response itself, with deadlines for timeouts, and no goroutine
// or channel of a transport in between. A pooled connection the backend closed while it was
// idle is replaced once, transparently. Server (server.go) is a lean HTTP/1.1 server that
// drives the Gateway, or any http.Handler, the same way: one goroutine per connection that
// reads a request, calls the handler and writes the response, usually in one write; it
// watches for a client that goes away only once a request has run for a while. A Gateway is
// also an ordinary http.Handler and works under net/http's server. The HTTP/1.1 parsers
// (h1head.go, h1request.go, h1body.go) are fuzzed against net/http's.
//
// New builds a Gateway, Run drives its scrape loops, ServeHTTP serves clients, Reload swaps
// the configuration without dropping requests in flight, and Drain marks it not ready before
// a shutdown. NewServer and Server.Serve put it on a listener; Server.Shutdown drains it.
package gateway
