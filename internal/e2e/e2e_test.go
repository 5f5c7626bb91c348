package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
)

const model = "llama-3.1-8b"

// system is the live system: replicas, the router in front of them, and health events.
type system struct {
	replicas []*emulate.Replica
	gw       *gateway.Gateway
	url      string
	health   chan healthEvent
}

type healthEvent struct {
	backend string
	ready   bool
}

func start(t *testing.T, n int, policy string, speed float64) *system {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &system{health: make(chan healthEvent, 64)}
	var urls []string
	for range n {
		cfg := emulate.DefaultConfig()
		cfg.GPU, cfg.Model, cfg.Speed, cfg.Addr = "H100-SXM-80GB", model, speed, "127.0.0.1:0"
		r, err := emulate.NewReplica(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		s.replicas = append(s.replicas, r)
		urls = append(urls, "http://"+r.Addr())
	}
	gcfg := gateway.DefaultConfig()
	gcfg.Policy, gcfg.Backends, gcfg.DebugHeaders = policy, urls, true
	gw, err := gateway.New(gcfg, gateway.Options{OnHealth: func(_, b string, ready bool, _ error) {
		select {
		case s.health <- healthEvent{b, ready}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	go gw.Run(ctx)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	s.gw, s.url = gw, srv.URL
	return s
}

type reply struct {
	status             int
	text               string
	cached, completion int
	done, errorEvent   bool
	transport          string
}

// chat sends a chat completion and reads the whole answer, streamed or not.
func chat(t *testing.T, url string, msgs []map[string]string, stream bool, maxTokens int) reply {
	t.Helper()
	return chatHead(t, url, msgs, stream, maxTokens, nil)
}

// chatHead is chat that calls onHead, when set, with the response head before reading the body.
func chatHead(t *testing.T, url string, msgs []map[string]string, stream bool, maxTokens int, onHead func(*http.Response)) reply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model": model, "max_tokens": maxTokens, "messages": msgs, "stream": stream,
		"stream_options": map[string]any{"include_usage": true},
	})
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return reply{transport: err.Error()}
	}
	defer resp.Body.Close()
	if onHead != nil {
		onHead(resp)
	}
	rep := reply{status: resp.StatusCode}
	if !stream || resp.StatusCode != http.StatusOK {
		var out struct {
			Choices []struct{ Message struct{ Content string } }
			Usage   usage
		}
		data, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(data, &out) == nil && len(out.Choices) > 0 {
			rep.text, rep.done = out.Choices[0].Message.Content, true
			rep.cached, rep.completion = out.Usage.Details.Cached, out.Usage.Completion
		}
		return rep
	}
	readStream(resp.Body, &rep)
	return rep
}

type usage struct {
	Completion int `json:"completion_tokens"`
	Details    struct {
		Cached int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func readStream(r io.Reader, rep *reply) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			rep.done = true
			continue
		}
		var chunk struct {
			Choices []struct{ Delta struct{ Content string } }
			Usage   *usage
			Error   any
		}
		if json.Unmarshal([]byte(data), &chunk) != nil {
			continue
		}
		if chunk.Error != nil {
			rep.errorEvent = true
		}
		for _, c := range chunk.Choices {
			rep.text += c.Delta.Content
		}
		if chunk.Usage != nil {
			rep.cached, rep.completion = chunk.Usage.Details.Cached, chunk.Usage.Completion
		}
	}
	if sc.Err() != nil {
		rep.transport = sc.Err().Error()
	}
}

func TestChatThroughRouter(t *testing.T) {
	s := start(t, 2, "prefix-score", 20)
	msgs := []map[string]string{{"role": "user", "content": "hello there"}}
	for _, stream := range []bool{false, true} {
		rep := chat(t, s.url, msgs, stream, 12)
		if rep.status != http.StatusOK || !rep.done || rep.completion != 12 || rep.text == "" {
			t.Fatalf("stream=%v: %+v", stream, rep)
		}
	}
}

// The second turn of a conversation re-sends the first: routed by a prefix policy to the same
// replica, it is served from that replica's prefix cache.
func TestConversationHitsTheCacheOnItsSecondTurn(t *testing.T) {
	for _, policy := range []string{"prefix-score", "prefix-cache", "cache-aware"} {
		t.Run(policy, func(t *testing.T) {
			s := start(t, 3, policy, 20)
			system := strings.Repeat("You are a careful assistant for a logistics company. ", 60)
			turn1 := []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": "Where is order 17?"}}
			first := chat(t, s.url, turn1, true, 12)
			if first.status != http.StatusOK || !first.done {
				t.Fatalf("turn 1: %+v", first)
			}
			turn2 := append(turn1, map[string]string{"role": "assistant", "content": first.text},
				map[string]string{"role": "user", "content": "And order 18?"})
			second := chat(t, s.url, turn2, true, 12)
			if second.status != http.StatusOK || second.cached < 512 {
				t.Fatalf("turn 2 cached %d tokens (want most of the ~800-token system prompt): %+v", second.cached, second)
			}
		})
	}
}

// A replica killed during a burst, once it has streamed a first token: every request
// completes or ends with a clear error, the requests it had not answered yet move to the
// others, the streams it had started fail, the router's in-flight counts return to zero, the
// dead replica is ejected, and it is re-admitted once it comes back.
func TestReplicaKilledDuringBurst(t *testing.T) {
	s := start(t, 3, "least-request", 4) // ~300 decode steps take about a second
	dead := "http://" + s.replicas[0].Addr()
	deadName := s.backendName(dead)
	const n = 36
	var wg sync.WaitGroup
	replies := make([]reply, n)
	streaming := make(chan struct{}, n) // a stream of the replica to kill got its head
	onHead := func(resp *http.Response) {
		if resp.Header.Get("X-Kvroute-Endpoint") == deadName && resp.StatusCode == http.StatusOK {
			streaming <- struct{}{}
		}
	}
	for i := range n {
		wg.Go(func() {
			msgs := []map[string]string{{"role": "user", "content": fmt.Sprintf("request %d %s", i, strings.Repeat("x", 400))}}
			if i%2 == 0 { // streams four times as long, so one is still running when the kill comes on a busy machine
				replies[i] = chatHead(t, s.url, msgs, true, 1200, onHead)
			} else {
				replies[i] = chat(t, s.url, msgs, false, 300)
			}
		})
	}
	select {
	case <-streaming:
	case <-time.After(20 * time.Second):
		t.Fatal("no stream of the replica to kill started")
	}
	s.replicas[0].Fail()
	wg.Wait()
	ok, failed := 0, 0
	for i, r := range replies {
		switch {
		case r.status == http.StatusOK && r.done && !r.errorEvent && r.transport == "":
			ok++
		case r.status >= 400 || r.errorEvent || r.transport != "" || (r.status == http.StatusOK && !r.done):
			failed++ // a clear error: status, SSE error event, or a broken connection
		default:
			t.Errorf("request %d ended ambiguously: %+v", i, r)
		}
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("%d completed, %d failed: want both (a stream cut after its first token cannot be retried)", ok, failed)
	}
	t.Logf("burst of %d with a replica killed: %d completed, %d clear errors", n, ok, failed)
	waitHealth(t, s, dead, false)
	for _, b := range s.gw.Backends() {
		if b.InFlight != 0 || b.InFlightTokens != 0 {
			t.Errorf("%s: in-flight %d/%d after the burst", b.URL, b.InFlight, b.InFlightTokens)
		}
	}
	s.replicas[0].Recover()
	waitHealth(t, s, dead, true)
	if rep := chat(t, s.url, []map[string]string{{"role": "user", "content": "after"}}, true, 8); rep.status != http.StatusOK || !rep.done {
		t.Fatalf("after recovery: %+v", rep)
	}
}

// backendName is the router's name for the backend at url.
func (s *system) backendName(url string) string {
	for _, b := range s.gw.Backends() {
		if b.URL == url {
			return b.Name
		}
	}
	return ""
}

// waitHealth waits for the router to report backend's readiness as ready.
func waitHealth(t *testing.T, s *system, backend string, ready bool) {
	t.Helper()
	for _, b := range s.gw.Backends() {
		if b.URL == backend && b.Ready == ready {
			return
		}
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-s.health:
			if ev.backend == backend && ev.ready == ready {
				return
			}
		case <-timeout:
			t.Fatalf("%s never became ready=%v", backend, ready)
		}
	}
}
