package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"kvroute/internal/openai"
	"kvroute/internal/vllm"
)

// fakeModel is the model every fake backend serves unless told otherwise.
const fakeModel = "llama-3.1-8b"

// fake is an OpenAI-compatible, vLLM-shaped backend on a loopback httptest server. It
// streams one chunk per token, reports usage, serves /metrics with its live running count
// and /v1/models, and can hold streams after their first token, or die mid-stream.
type fake struct {
	t      *testing.T
	name   string
	models []string
	addr   string

	mu     sync.Mutex
	srv    *httptest.Server
	dead   chan struct{}  // closed when the current server is killed
	bodies [][]byte       // every completion body received, as sent
	peers  []string       // the client address each body came from, in the same order
	byPeer map[string]int // requests of every path, by client address

	running  atomic.Int64
	served   atomic.Int64
	tokenize atomic.Int64  // /tokenize calls answered
	hold     chan struct{} // when set, streams wait on it after their first token
	started  chan string   // when set, receives the name after a held stream's first token
	dieAfter int           // when > 0, streams abort the connection after this many tokens
	// dieMidEvent makes a stream that dies send the start of one more event first.
	dieMidEvent bool
	noHeaders   chan struct{} // when set, handlers wait on it before writing anything
	gone        chan struct{} // when set, receives when a handler saw its client go away
	// abortBeforeBody makes completions send their headers, then drop the connection.
	abortBeforeBody bool
	// headless, when not headlessNone, makes completions read the request, then end the
	// connection without a response: with a TCP reset or a clean close.
	headless atomic.Int32
	// flood makes streams send large events until the client goes away.
	flood bool
	// status, when set, makes completions answer it at once with an OpenAI error body of
	// known length, as uvicorn's --limit-concurrency or a rate limiter refuses work.
	status int
	// connState, when set before start, is the server's connection state hook.
	connState func(net.Conn, http.ConnState)
	// handlers, when set before the first request, serve their paths instead of the fake's
	// own handlers (requests are still counted by peer).
	handlers map[string]http.HandlerFunc
}

func newFake(t *testing.T, name string, models ...string) *fake {
	t.Helper()
	if len(models) == 0 {
		models = []string{fakeModel}
	}
	f := &fake{t: t, name: name, models: models}
	f.start(nil)
	t.Cleanup(f.kill)
	return f
}

// start serves on ln, or on a new loopback port when ln is nil.
func (f *fake) start(ln net.Listener) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	srv.Config.ConnState = f.connState
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	f.mu.Lock()
	f.srv, f.addr, f.dead = srv, srv.Listener.Addr().String(), make(chan struct{})
	f.mu.Unlock()
}

func (f *fake) url() string { return "http://" + f.addr }

// kill closes every connection and the listener, as a crashed process would.
func (f *fake) kill() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		close(f.dead) // handlers holding a stream return
		srv.Listener.Close()
		srv.CloseClientConnections()
		srv.Close()
	}
}

// revive serves again on the same address.
func (f *fake) revive() {
	f.t.Helper()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatalf("revive %s: %v", f.name, err)
	}
	f.start(ln)
}

// receivedWith is the number of completion requests the fake received whose body holds s.
func (f *fake) receivedWith(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.bodies {
		if bytes.Contains(b, []byte(s)) {
			n++
		}
	}
	return n
}

// peersWith returns the client addresses of the completion requests whose body holds s.
func (f *fake) peersWith(s string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i, b := range f.bodies {
		if bytes.Contains(b, []byte(s)) {
			out = append(out, f.peers[i])
		}
	}
	return out
}

// requestsFrom is the number of requests of every path that came from the client address peer.
func (f *fake) requestsFrom(peer string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byPeer[peer]
}

func (f *fake) lastBody() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		return nil
	}
	return f.bodies[len(f.bodies)-1]
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if f.byPeer == nil {
		f.byPeer = map[string]int{}
	}
	f.byPeer[r.RemoteAddr]++
	f.mu.Unlock()
	if h := f.handlers[r.URL.Path]; h != nil {
		h(w, r)
		return
	}
	switch r.URL.Path {
	case "/metrics":
		_ = vllm.Write(w, []vllm.Engine{{Model: f.models[0], Running: int(f.running.Load()), NumGPUBlocks: 1000, BlockSize: 16}})
	case "/v1/models":
		list := openai.ModelList{Object: "list"}
		for _, m := range f.models {
			list.Data = append(list.Data, openai.Model{ID: m, Object: "model", OwnedBy: f.name})
		}
		_ = json.NewEncoder(w).Encode(list)
	case "/v1/chat/completions", "/v1/completions":
		f.complete(w, r, r.URL.Path == "/v1/chat/completions")
	case "/tokenize":
		f.tokenize.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"count":3,"max_model_len":8192,"tokens":[7,8,9]}`)
	default:
		http.NotFound(w, r)
	}
}

type fakeRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	MaxTokens     int    `json:"max_tokens"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (f *fake) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	f.running.Add(1)
	defer f.running.Add(-1)
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.peers = append(f.peers, r.RemoteAddr)
	f.mu.Unlock()
	if mode := f.headless.Load(); mode != headlessNone {
		f.hangUp(w, mode == headlessReset)
		return
	}
	if f.status != 0 {
		openai.WriteError(w, &openai.Error{Status: f.status, Type: openai.TypeServer, Message: "busy, try again"})
		return
	}
	if f.noHeaders != nil {
		select {
		case <-f.noHeaders:
		case <-r.Context().Done():
			return
		}
	}
	var req fakeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		openai.WriteError(w, &openai.Error{Status: 400, Message: err.Error(), Type: openai.TypeInvalidRequest})
		return
	}
	f.served.Add(1)
	w.Header().Set("X-Fake-Backend", f.name)
	if f.abortBeforeBody {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	n := req.MaxTokens
	if n == 0 {
		n = 3
	}
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		len(body)/4, n, len(body)/4+n, len(body)/8)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"cmpl-1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"length"}],"usage":%s}`,
			req.Model, bytes.Repeat([]byte("tok "), n), usage)
		return
	}
	f.stream(w, r, chat, n, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, usage)
}

func (f *fake) stream(w http.ResponseWriter, r *http.Request, chat bool, n int, includeUsage bool, usage string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	if f.flood {
		f.floodStream(w, r)
		return
	}
	chunk := `data: {"choices":[{"index":0,"text":"tok"}]}` + "\n\n"
	if chat {
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		chunk = `data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}` + "\n\n"
	}
	for i := range n {
		fmt.Fprint(w, chunk)
		fl.Flush()
		if f.dieAfter > 0 && i+1 == f.dieAfter {
			if f.dieMidEvent {
				fmt.Fprint(w, `data: {"choi`)
				fl.Flush()
			}
			panic(http.ErrAbortHandler)
		}
		if i == 0 && f.hold != nil {
			if f.started != nil {
				f.started <- f.name
			}
			f.mu.Lock()
			dead := f.dead
			f.mu.Unlock()
			select {
			case <-f.hold:
			case <-dead:
				panic(http.ErrAbortHandler)
			case <-r.Context().Done():
				if f.gone != nil {
					f.gone <- struct{}{}
				}
				return
			}
		}
	}
	if includeUsage {
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":%s}\n\n", usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// Values of fake.headless.
const (
	headlessNone  = iota
	headlessReset // the connection ends with a TCP reset (SO_LINGER 0)
	headlessClose // the connection ends with a clean close (FIN)
)

// hangUp ends the request's connection without writing anything: with a reset when reset is
// set, else with a clean close.
func (f *fake) hangUp(w http.ResponseWriter, reset bool) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		f.t.Errorf("%s: hijack: %v", f.name, err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// floodStream writes 64 KiB events until the client goes away.
func (f *fake) floodStream(w http.ResponseWriter, r *http.Request) {
	event := []byte(`data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 64<<10) + `"}}]}` + "\n\n")
	for {
		if _, err := w.Write(event); err != nil || r.Context().Err() != nil {
			if f.gone != nil {
				f.gone <- struct{}{}
			}
			return
		}
	}
}
