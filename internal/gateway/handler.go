package gateway

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"kvroute/internal/openai"
)

// ServeHTTP serves POST /v1/chat/completions and /v1/completions (routed and proxied),
// GET /v1/models (the union of the backends' models), /health (the process is up), /ready
// (some backend is ready, the gateway is not draining and its KV index is not loading a
// peer's snapshot), /metrics (Prometheus) and /kv/snapshot (the KV index, for peer routers),
// the last two with the API key when keys are configured. When a backend fails midway
// through a non-streamed response, ServeHTTP aborts the response with http.ErrAbortHandler
// so that the client sees a failed response, never a truncated one.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions":
		g.serveCompletion(w, r, kindChat)
	case "/v1/completions":
		g.serveCompletion(w, r, kindCompletion)
	case "/v1/models":
		g.serveModels(w, r)
	case "/metrics", "/kv/snapshot":
		if !g.current.Load().authorized(r) {
			openai.WriteError(w, errUnauthorized)
			return
		}
		g.serveAdmin(w, r)
	default:
		g.serveAdmin(w, r)
	}
}

// AdminHandler serves /health, /ready, /metrics and /kv/snapshot (the KV-event index, for
// peer routers that bootstrap from it) with no API key, for a listener only operators and
// peer routers reach (cmd/route's admin_listen).
func (g *Gateway) AdminHandler() http.Handler { return http.HandlerFunc(g.serveAdmin) }

func (g *Gateway) serveAdmin(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health", "/ready", "/metrics", "/kv/snapshot":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return
		}
	default:
		openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest,
			Message: "no route for " + r.Method + " " + r.URL.Path, Code: "not_found"})
		return
	}
	switch r.URL.Path {
	case "/health":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case "/ready":
		g.serveReady(w)
	case "/kv/snapshot":
		g.serveSnapshot(w)
	default:
		g.promHTTP.ServeHTTP(w, r)
	}
}

func (g *Gateway) serveReady(w http.ResponseWriter) {
	ready := 0
	g.mu.Lock()
	for _, b := range g.current.Load().backends {
		if b.ready {
			ready++
		}
	}
	g.mu.Unlock()
	switch {
	case g.draining.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "draining", "ready_backends": ready})
	case ready == 0:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "no ready backend", "ready_backends": ready})
	case g.kvIndex.Holding(): // loading a peer's snapshot: not yet routing on the real caches
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "kv index bootstrapping", "ready_backends": ready})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "ready_backends": ready})
	}
}

// authorized reports whether r carries one of st's API keys, or st has none.
func (st *state) authorized(r *http.Request) bool {
	if len(st.keys) == 0 {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	found := 0
	for _, k := range st.keys {
		found |= subtle.ConstantTimeCompare([]byte(tok), k)
	}
	return found == 1
}

// Errors the gateway answers with before reaching a backend.
var (
	errUnauthorized = &openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest,
		Message: "missing or invalid API key: send Authorization: Bearer <key>", Code: "invalid_api_key"}
)

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	openai.WriteError(w, &openai.Error{Status: http.StatusMethodNotAllowed, Type: openai.TypeInvalidRequest,
		Message: "method not allowed; use " + allow, Code: "method_not_allowed"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		openai.WriteError(w, &openai.Error{Status: http.StatusInternalServerError, Type: openai.TypeServer, Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
