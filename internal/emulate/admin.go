package emulate

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"kvroute/internal/openai"
)

// AdminHandler returns the failure-injection API, meant to be mounted at /admin/ (the
// replica's own handler does so; cmd/emulate can also serve it on a separate address, which
// stays reachable while the replica is down):
//
//	POST /admin/fail[?for=DURATION]  Fail, and Recover after DURATION ("2s") when given
//	POST /admin/recover              Recover
//	POST /admin/slow?factor=F        SetSlowdown(F)
//	POST /admin/errors?rate=R[&status=S]  SetErrorRate(R), and SetErrorStatus(S) when given
//	GET  /admin/state                {"down", "slowdown", "error_rate"}
//
// Each POST answers 200 with {"ok": true}, or an OpenAI-style 400 for a bad parameter.
func (r *Replica) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/fail", r.adminFail)
	mux.HandleFunc("POST /admin/recover", func(w http.ResponseWriter, _ *http.Request) {
		if err := r.Recover(); err != nil {
			openai.WriteError(w, &openai.Error{Status: http.StatusInternalServerError, Type: openai.TypeServer, Message: err.Error()})
			return
		}
		ok(w)
	})
	mux.HandleFunc("POST /admin/slow", func(w http.ResponseWriter, req *http.Request) {
		adminSet(w, req, "factor", r.SetSlowdown)
	})
	mux.HandleFunc("POST /admin/errors", func(w http.ResponseWriter, req *http.Request) {
		if s := req.URL.Query().Get("status"); s != "" {
			code, err := strconv.Atoi(s)
			if err == nil {
				err = r.SetErrorStatus(code)
			}
			if err != nil {
				badParam(w, "status", fmt.Errorf("emulate: status must be an HTTP status 400..599, got %q", s))
				return
			}
		}
		adminSet(w, req, "rate", r.SetErrorRate)
	})
	mux.HandleFunc("GET /admin/state", r.adminState)
	return mux
}

func ok(w http.ResponseWriter) { writeJSON(w, http.StatusOK, map[string]bool{"ok": true}) }

func badParam(w http.ResponseWriter, param string, err error) {
	openai.WriteError(w, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest,
		Param: param, Message: err.Error()})
}

// adminFail fails the replica, answers, then closes every connection, this one included.
func (r *Replica) adminFail(w http.ResponseWriter, req *http.Request) {
	var d time.Duration
	if s := req.URL.Query().Get("for"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			badParam(w, "for", fmt.Errorf("emulate: for must be a positive duration, got %q", s))
			return
		}
	}
	srv := r.failEngine() // down, refusing connections and with nothing in flight once the client knows
	ok(w)
	_ = http.NewResponseController(w).Flush() // the response leaves before the connection closes
	if srv != nil {
		_ = srv.Close() // its only error is the listener's close error, which changes nothing
	}
	if d > 0 {
		r.recoverAfter(d)
	}
}

// adminSet parses a float query parameter and applies it.
func adminSet(w http.ResponseWriter, req *http.Request, param string, set func(float64) error) {
	v, err := strconv.ParseFloat(req.URL.Query().Get(param), 64)
	if err != nil {
		badParam(w, param, fmt.Errorf("emulate: %s must be a number, got %q", param, req.URL.Query().Get(param)))
		return
	}
	if err := set(v); err != nil {
		badParam(w, param, err)
		return
	}
	ok(w)
}

func (r *Replica) adminState(w http.ResponseWriter, _ *http.Request) {
	slow := 1.0
	r.do(func(c *core) { slow = c.slow })
	r.mu.Lock()
	v := struct {
		Down      bool    `json:"down"`
		Slowdown  float64 `json:"slowdown"`
		ErrorRate float64 `json:"error_rate"`
	}{r.down, slow, r.errRate}
	r.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}
