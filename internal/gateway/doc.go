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
// The HTTP is the standard library's. Completions go through an httputil.ReverseProxy
// (proxy.go, forward.go): its Transport hook asks the policy for a backend per attempt and
// sends the request over an http.Transport. One failure rule (retry.go) decides when a
// request goes to another backend: when its attempt failed before any byte of the response
// reached the client (the connection could not be made, was reset or closed before the
// response head, no head came within the header timeout, or the backend answered 503 or
// 429), up to limits.max_retries times; never after, and the transport never replays a
// request on its own. The response body is wrapped (relay.go)
// to bound each read with the header, first-byte and idle timeouts, read the usage the
// response reports, pass an event stream on in whole events, end a stream that breaks with
// one well-formed OpenAI error event, and release the reservation. Server (server.go) is
// net/http's server with what a router in front of GPUs needs of it: header, body, per-write
// and idle timeouts, a header size limit, and a cap on open connections answered with a 503.
//
// Scrapes double as health checks: consecutive failures eject a backend (Ready=false), an
// ejected backend is probed with exponential backoff and re-admitted on its first good
// scrape, and a connection refused while proxying ejects it at once. Backends have names;
// clients, error bodies and metric labels see those, never the backends' URLs.
//
// A policy that reads the replicas' caches (precise-prefix) is fed their vLLM KV events
// (kvevents.go: configuration; kvsources.go: the dialed, bound and forwarded streams a
// reload diffs; kvboot.go: a late router's bootstrap from a peer's /kv/snapshot, and an
// ejected backend's index kept until its next event; kvmetrics.go: their metrics).
//
// New builds a Gateway, StartKVEvents binds and dials its KV-event sources (Run calls it),
// Run drives its scrape loops, ServeHTTP serves clients (AdminHandler serves /health, /ready,
// /metrics and /kv/snapshot alone, for an operators' listener), Reload swaps the
// configuration without dropping requests in flight, and Drain marks it not ready before a
// shutdown while it goes on serving; Idle reports when nothing is left in flight. NewServer
// and Server.Serve put a handler on a listener; Server.Shutdown drains it.
package gateway
