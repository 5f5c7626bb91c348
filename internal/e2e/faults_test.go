package e2e

import (
	"bytes"
	"context"
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
	"time"

	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
	"kvroute/internal/openai"
)

// reception is one completion request as an emulated replica received it.
type reception struct {
	id     string // the client's X-Test-Id
	status int    // what the replica answered with
}

// recordingReplica serves an emulated replica behind its own listener and records every
// completion request it receives, as it arrives and with the status it answered: the test's
// view of what each backend actually received.
type recordingReplica struct {
	r     *emulate.Replica
	srv   *httptest.Server
	addr  string
	reset *atomic.Bool // when set, the next completion it receives is closed unanswered (and the flag cleared)

	mu      sync.Mutex
	arrived []string    // the X-Test-Id of every completion request, as it arrived
	got     []reception // the completion requests answered, with their status
	// onArrive, when set, hears the number of completion requests arrived so far.
	onArrive func(n int)
}

// startRecording starts n emulated replicas at speed, each behind a recordingReplica on a
// loopback port, until the test ends.
func startRecording(t *testing.T, ctx context.Context, n int, speed float64) []*recordingReplica {
	t.Helper()
	reps := make([]*recordingReplica, n)
	for i := range reps {
		cfg := emulate.DefaultConfig()
		cfg.GPU, cfg.Model, cfg.Speed = "H100-SXM-80GB", model, speed
		r, err := emulate.NewReplica(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		rr := &recordingReplica{r: r}
		rr.srv = httptest.NewServer(rr)
		rr.addr = rr.srv.Listener.Addr().String()
		t.Cleanup(func() {
			rr.mu.Lock()
			srv := rr.srv
			rr.mu.Unlock()
			srv.Close()
			r.Close()
		})
		reps[i] = rr
	}
	return reps
}

func (rr *recordingReplica) url() string { return "http://" + rr.addr }

func (rr *recordingReplica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !strings.HasPrefix(req.URL.Path, "/v1/") || req.Method != http.MethodPost {
		rr.r.ServeHTTP(w, req)
		return
	}
	rr.mu.Lock()
	rr.arrived = append(rr.arrived, req.Header.Get("X-Test-Id"))
	n, onArrive := len(rr.arrived), rr.onArrive
	rr.mu.Unlock()
	if onArrive != nil {
		onArrive(n)
	}
	if rr.reset != nil && rr.reset.CompareAndSwap(true, false) {
		closeUnanswered(w, req)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	rr.r.ServeHTTP(sw, req)
	rr.mu.Lock()
	rr.got = append(rr.got, reception{req.Header.Get("X-Test-Id"), sw.status})
	rr.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// closeUnanswered reads req and closes its connection without a response, as a replica
// crashing before its answer does.
func closeUnanswered(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err) // httptest's HTTP/1.1 connections can always be hijacked
	}
	conn.Close()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// kill closes the replica's listener and connections and aborts its work, as a crash would.
func (rr *recordingReplica) kill() {
	rr.r.Fail()
	rr.srv.CloseClientConnections()
	rr.srv.Listener.Close()
}

// revive serves the replica again on the same address.
func (rr *recordingReplica) revive(t *testing.T) {
	if err := rr.r.Recover(); err != nil {
		t.Error(err)
	}
	ln, err := net.Listen("tcp", rr.addr)
	if err != nil {
		t.Errorf("revive: %v", err)
		return
	}
	srv := httptest.NewUnstartedServer(rr)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	rr.mu.Lock()
	rr.srv = srv
	rr.mu.Unlock()
}

// TestFaultsUnderLoad streams ~50 clients' requests through the router while one replica
// refuses work (503), one fails requests (500), one is slowed fivefold and one is killed and
// brought back. Every request ends in a response a client can read: a well-formed stream
// ending with [DONE] or with one whole error event, or an error status with an OpenAI error
// body. No request is lost, no backend receives a request twice, no two backends answer the
// same request (a request goes to a second backend only after the first failed before
// answering it: refused it with a 503, or died), and the router's in-flight counts return to 0.
func TestFaultsUnderLoad(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reps := startRecording(t, ctx, 4, 10)
	var backends []string
	for i, rr := range reps {
		backends = append(backends, fmt.Sprintf("r%d=%s", i, rr.url()))
	}
	gcfg := gateway.DefaultConfig()
	gcfg.Policy, gcfg.Backends = "least-request", backends
	gcfg.Health.MetricsInterval, gcfg.Health.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	gw, err := gateway.New(gcfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	go gw.Run(ctx)
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)

	const clients, perClient = 48, 6
	results := make(chan faultResult, clients*perClient)
	var wg sync.WaitGroup
	progress := make(chan struct{}, clients*perClient)
	for c := range clients {
		wg.Go(func() {
			for k := range perClient {
				id := fmt.Sprintf("c%d-r%d", c, k)
				results <- send(front.URL, id, c%4 != 3)
				progress <- struct{}{}
			}
		})
	}
	injectFaults(t, reps, progress, clients*perClient)
	wg.Wait()
	close(results)
	checkOutcomes(t, results, clients*perClient)
	checkReceptions(t, reps)
	for _, b := range gw.Backends() {
		if b.InFlight != 0 || b.InFlightTokens != 0 {
			t.Errorf("%s: in flight %d requests, %d tokens after every request ended", b.Name, b.InFlight, b.InFlightTokens)
		}
	}
}

// injectFaults breaks replicas as the run progresses: refusals, failures and a slowdown once
// a tenth of the requests are done, a kill at a third, the revival at two thirds.
func injectFaults(t *testing.T, reps []*recordingReplica, progress <-chan struct{}, total int) {
	done := 0
	step := func(until int) {
		for ; done < until; done++ {
			<-progress
		}
	}
	step(total / 10)
	for _, f := range []func() error{
		func() error { return reps[0].r.SetErrorStatus(http.StatusServiceUnavailable) },
		func() error { return reps[0].r.SetErrorRate(0.5) },
		func() error { return reps[1].r.SetErrorRate(0.25) },
		func() error { return reps[2].r.SetSlowdown(5) },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	step(total / 3)
	reps[3].kill()
	step(2 * total / 3)
	reps[3].revive(t)
	step(total)
}

// faultResult is how one request ended, as its client saw it.
type faultResult struct {
	id        string
	stream    bool
	status    int
	body      string
	transport error
}

// send sends one chat request tagged with id and reads the whole response.
func send(url, id string, stream bool) faultResult {
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 24, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": id + " " + strings.Repeat("tell me more ", 40)}}})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-Id", id)
	res := faultResult{id: id, stream: stream}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		res.transport = err
		return res
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	res.status, res.body, res.transport = resp.StatusCode, string(b), err
	return res
}

// checkOutcomes checks that every request ended in something its client can read.
func checkOutcomes(t *testing.T, results <-chan faultResult, total int) {
	t.Helper()
	n, completed, errorEvents, errorStatuses := 0, 0, 0, map[int]int{}
	for r := range results {
		n++
		switch {
		case r.transport != nil:
			t.Errorf("%s: the client got a transport error: %v", r.id, r.transport)
		case r.status == http.StatusOK && r.stream:
			if err := openai.CheckStream([]byte(r.body)); err != nil {
				t.Errorf("%s: %v in %q", r.id, err, r.body)
			} else if strings.Contains(r.body, `data: {"error"`) {
				errorEvents++
			} else {
				completed++
			}
		case r.status == http.StatusOK:
			var v struct{ Choices []any }
			if json.Unmarshal([]byte(r.body), &v) != nil || len(v.Choices) == 0 {
				t.Errorf("%s: a 200 that is not a completion: %q", r.id, r.body)
			}
			completed++
		default:
			var e struct {
				Error *struct{ Message string } `json:"error"`
			}
			if json.Unmarshal([]byte(r.body), &e) != nil || e.Error == nil {
				t.Errorf("%s: status %d without an OpenAI error body: %q", r.id, r.status, r.body)
			}
			errorStatuses[r.status]++
		}
	}
	if n != total {
		t.Errorf("%d of %d requests ended", n, total)
	}
	if completed < total/2 || errorStatuses[http.StatusInternalServerError] == 0 {
		t.Errorf("%d completed, %d error events, error statuses %v: want most completed and the 500s relayed", completed, errorEvents, errorStatuses)
	}
	t.Logf("%d requests: %d completed, %d streams ended by an error event, error statuses %v", n, completed, errorEvents, errorStatuses)
}

// checkReceptions checks that no backend received a request twice and that a request a
// backend answered with anything but a refusal (503) no other backend answered.
func checkReceptions(t *testing.T, reps []*recordingReplica) {
	t.Helper()
	handled, refused := map[string]int{}, 0
	for i, rr := range reps {
		seen := map[string]bool{}
		rr.mu.Lock()
		for _, id := range rr.arrived {
			if seen[id] {
				t.Errorf("replica %d received %s twice", i, id)
			}
			seen[id] = true
		}
		for _, rc := range rr.got {
			if rc.status == http.StatusServiceUnavailable {
				refused++
			} else {
				handled[rc.id]++
			}
		}
		rr.mu.Unlock()
	}
	for id, n := range handled {
		if n > 1 {
			t.Errorf("%s was answered by %d backends", id, n)
		}
	}
	if refused == 0 {
		t.Error("no request was refused: the test exercised no retry")
	}
}
