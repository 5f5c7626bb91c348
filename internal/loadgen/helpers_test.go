package loadgen

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"kvroute/internal/openai"
	"kvroute/workloads"
)

// received is one request as the fake server saw it.
type received struct {
	path    string
	header  http.Header
	raw     map[string]any
	req     openai.Request
	arrived time.Time
}

// fakeLLM is an OpenAI-shaped streaming server: it answers every request with words, one
// content chunk each, then a usage chunk and [DONE]. Hooks change its behaviour.
type fakeLLM struct {
	// delay, when set, is how long to wait before the first chunk; gap between chunks.
	delay, gap time.Duration
	// answer returns the words to stream; nil streams max_tokens words "wN ".
	answer func(r *received) []string
	// noUsage leaves the usage chunk out; prompt and cached are the prompt_tokens (0: the
	// prompt's length / 5) and cached_tokens it reports.
	noUsage        bool
	prompt, cached int
	// headers are added to every response.
	headers map[string]string

	mu       sync.Mutex
	got      []*received
	inFlight int
	peak     int
}

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc, err := f.receive(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	left := false
	defer func() {
		if !left {
			f.leave()
		}
	}()
	if !pause(r, f.delay) {
		return
	}
	words := f.words(rc)
	for k, v := range f.headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	writeEvent(w, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
	for i, word := range words {
		if i > 0 && !pause(r, f.gap) {
			return
		}
		b, _ := json.Marshal(word)
		if rc.req.Messages != nil {
			writeEvent(w, fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%s}}]}`, b))
		} else {
			writeEvent(w, fmt.Sprintf(`{"choices":[{"index":0,"text":%s}]}`, b))
		}
	}
	if !f.noUsage {
		writeEvent(w, fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
			cmp.Or(f.prompt, len(rc.req.Prompt)/5), len(words), f.cached))
	}
	f.leave() // before [DONE], so the client cannot send its next request first
	left = true
	writeEvent(w, "[DONE]")
}

// pause waits d, or reports false when the client left first.
func pause(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	}
}

func (f *fakeLLM) receive(r *http.Request) (*received, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	rc := &received{path: r.URL.Path, header: r.Header.Clone(), arrived: time.Now()}
	if err := json.Unmarshal(b, &rc.raw); err != nil {
		return nil, err
	}
	parse := openai.ParseChat
	if r.URL.Path == CompletionPath {
		parse = openai.ParseCompletion
	}
	if rc.req, err = parse(b); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, rc)
	f.inFlight++
	f.peak = max(f.peak, f.inFlight)
	return rc, nil
}

func (f *fakeLLM) leave() {
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
}

func (f *fakeLLM) words(rc *received) []string {
	if f.answer != nil {
		return f.answer(rc)
	}
	out := make([]string, rc.req.MaxTokens)
	for i := range out {
		out[i] = fmt.Sprintf("w%d ", i)
	}
	return out
}

func (f *fakeLLM) requests() []*received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*received(nil), f.got...)
}

// writeEvent writes one server-sent event and flushes it.
func writeEvent(w http.ResponseWriter, data string) {
	io.WriteString(w, "data: "+data+"\n\n")
	w.(http.Flusher).Flush()
}

// pipeListener is an in-memory network for tests inside a synctest bubble, where real
// sockets would stop fake time from advancing: each dial is one net.Pipe.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// servePipe serves h over in-memory pipes (call it inside the bubble) and returns a client
// for it; the server and the client's connections are closed when the test ends.
func servePipe(t *testing.T, h http.Handler) *http.Client {
	t.Helper()
	l := newPipeListener()
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	tr := &http.Transport{DialContext: l.dial, MaxIdleConnsPerHost: 1024}
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	return &http.Client{Transport: tr}
}

// pipeTarget is the Target used with servePipe: the host is never resolved.
const pipeTarget = "http://fake.invalid"

// sharedPrefix is a small shared-prefix workload: n requests at a constant rate per second.
func sharedPrefix(n int, rate float64, turns int) workloads.Config {
	return workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindSharedPrefix, Groups: 2, PromptsPerGroup: 4,
			SystemPromptTokens: 32, QuestionTokens: 8, OutputTokens: 4, Turns: turns, Repeat: ptr(true)},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessConstant, Rate: rate},
		Requests: n,
	}
}

func ptr[T any](v T) *T { return &v }

func mustStream(t *testing.T, cfg workloads.Config, opts ...workloads.Option) *workloads.Stream {
	t.Helper()
	s, err := workloads.Build(cfg, 7, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// collect runs the stream and returns every Result in the order they ended.
func collect(t *testing.T, ctx context.Context, o Options, s *workloads.Stream) ([]*Result, Stats, error) {
	t.Helper()
	var out []*Result
	st, err := Run(ctx, o, s, Sink{Result: func(r *Result) { out = append(out, r) }})
	return out, st, err
}

// byID indexes results by request id and fails on duplicates.
func byID(t *testing.T, rs []*Result) map[string]*Result {
	t.Helper()
	m := map[string]*Result{}
	for _, r := range rs {
		if _, dup := m[r.Record.ID]; dup {
			t.Errorf("request %s has two results", r.Record.ID)
		}
		m[r.Record.ID] = r
	}
	return m
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
