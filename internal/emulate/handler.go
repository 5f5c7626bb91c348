package emulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"kvroute/internal/openai"
)

// routes builds the replica's request multiplexer.
func (r *Replica) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, req *http.Request) { r.complete(w, req, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, req *http.Request) { r.complete(w, req, false) })
	mux.HandleFunc("GET /v1/models", r.models)
	mux.HandleFunc("GET /health", r.health)
	mux.HandleFunc("GET /metrics", r.metrics)
	mux.HandleFunc("POST /tokenize", r.tokenizeHandler)
	mux.HandleFunc("POST /nixl/read-done", r.readDone)
	mux.Handle("/admin/", r.AdminHandler())
	return mux
}

// ServeHTTP serves the OpenAI completion endpoints, /v1/models, /health, /metrics and the
// admin endpoints of AdminHandler under /admin/. While the replica is down it drops every
// connection without a response, as a dead server would.
func (r *Replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.Down() {
		panic(http.ErrAbortHandler)
	}
	r.mux.ServeHTTP(w, req)
}

// running reports whether the engine loop is up.
func (r *Replica) running() bool {
	r.mu.Lock()
	started := r.started
	r.mu.Unlock()
	if !started {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// notRunning is the error for requests that reach a replica that is not started or stopped.
func notRunning() *openai.Error {
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer,
		Message: "emulate: the replica is not running"}
}

// complete serves one chat or completion request from its arrival to its last byte.
func (r *Replica) complete(w http.ResponseWriter, req *http.Request, chat bool) {
	if !r.running() {
		openai.WriteError(w, notRunning())
		return
	}
	if status := r.injectError(); status != 0 {
		openai.WriteError(w, &openai.Error{Status: status, Type: openai.TypeServer, Message: "emulate: injected error"})
		return
	}
	p, oerr := r.parse(w, req, chat)
	if oerr != nil {
		openai.WriteError(w, oerr)
		return
	}
	if !r.enqueue(req.Context(), p.st) {
		if req.Context().Err() == nil {
			openai.WriteError(w, notRunning())
		}
		return
	}
	if p.stream {
		r.writeStream(w, req, p)
	} else {
		r.writeWhole(w, req, p)
	}
	if req.Context().Err() != nil {
		r.abort(p.st) // the client went away: free the engine, as vLLM aborts the request
	}
}

// abort ends st in the engine unless it has ended already.
func (r *Replica) abort(st *stream) {
	r.do(func(c *core) {
		if !st.ended {
			c.eng.Abort(&st.req)
		}
	})
}

// pending is a parsed request on its way through the engine.
type pending struct {
	st           *stream
	chat         bool
	stream       bool
	includeUsage bool
	id           string
	created      int64
	pd           pdLeg // the request's P/D leg, if any
}

// parse reads and checks a request body and prepares its engine request. It returns an
// OpenAI error for the client when the request is not acceptable.
func (r *Replica) parse(w http.ResponseWriter, req *http.Request, chat bool) (pending, *openai.Error) {
	body, e := r.readBody(w, req)
	if e != nil {
		return pending{}, e
	}
	o, e := r.parseBody(body, chat)
	if e != nil {
		return pending{}, e
	}
	prompt := r.promptIDs(o, chat)
	out := o.MaxTokens
	if out == 0 {
		out = r.cfg.DefaultMaxTokens
	}
	out = min(out, r.cfg.MaxTokensCap)
	if need := len(prompt) + out; need > r.capacity {
		param := "prompt"
		if chat {
			param = "messages"
		}
		return pending{}, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: param,
			Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens "+
				"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				r.capacity, need, len(prompt), out)}
	}
	n := r.ids.Add(1)
	p := pending{st: newStream(prompt, out, chat), chat: chat, stream: o.Stream, includeUsage: o.IncludeUsage,
		created: time.Now().Unix()}
	p.st.req.ID = fmt.Sprintf("%s-%d", r.idPrefix, n)
	p.id = "cmpl-" + p.st.req.ID
	if chat {
		p.id = "chatcmpl-" + p.st.req.ID
	}
	if e := r.pdCheck(&p, req, o.KVTransferParams); e != nil {
		return pending{}, e
	}
	p.st.pdParams = p.pd.params
	return p, nil
}

// models serves GET /v1/models.
func (r *Replica) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, openai.ModelList{Object: "list", Data: []openai.Model{{
		ID: r.served, Object: "model", Created: r.createdAt, OwnedBy: "vllm", Root: r.served, MaxModelLen: r.capacity,
	}}})
}

// health serves GET /health: 200 while the engine loop runs, as vLLM's does while its engine
// is alive.
func (r *Replica) health(w http.ResponseWriter, _ *http.Request) {
	if !r.running() {
		openai.WriteError(w, notRunning())
		return
	}
	w.WriteHeader(http.StatusOK)
}

// metrics serves GET /metrics.
func (r *Replica) metrics(w http.ResponseWriter, _ *http.Request) {
	var s snapshot
	if !r.running() || !r.do(func(c *core) { s = c.snapshot() }) {
		openai.WriteError(w, notRunning())
		return
	}
	var b bytes.Buffer
	if err := writeMetrics(&b, r.served, s, r.dep.MemoryUtilization, r.cfg.NumBlocks > 0); err != nil {
		openai.WriteError(w, &openai.Error{Status: http.StatusInternalServerError, Type: openai.TypeServer, Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b.Bytes()) // a failed write means the scraper left
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("emulate: marshal %T: %v", v, err)) // our own wire types always marshal
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b) // a failed write means the client left
}

// readBody reads a request body, up to the replica's MaxBodyBytes.
func (r *Replica) readBody(w http.ResponseWriter, req *http.Request) ([]byte, *openai.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes))
	if err == nil {
		return body, nil
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: openai.TypeInvalidRequest,
			Message: fmt.Sprintf("emulate: request body larger than %d bytes", r.cfg.MaxBodyBytes)}
	}
	return nil, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest,
		Message: "emulate: reading the request body: " + err.Error()}
}

// parseBody parses a chat or completion request for a model the replica serves.
func (r *Replica) parseBody(body []byte, chat bool) (openai.Request, *openai.Error) {
	parse := openai.ParseCompletion
	if chat {
		parse = openai.ParseChat
	}
	o, err := parse(body)
	if err != nil {
		e := &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Message: err.Error()}
		if re, ok := errors.AsType[*openai.RequestError](err); ok {
			e.Param = re.Param
		}
		return o, e
	}
	if o.Model != "" && !r.accepted[normalizeModel(o.Model)] {
		return o, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Param: "model",
			Code: "model_not_found", Message: fmt.Sprintf("The model `%s` does not exist.", o.Model)}
	}
	return o, nil
}
