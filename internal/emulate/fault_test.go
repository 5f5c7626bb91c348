package emulate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestFailDuringStreams fails a replica with streams and whole requests in flight: every one
// must end with an error (never hang, never end cleanly), new connections are refused, and
// after Recover the replica serves again with an empty cache.
func TestFailDuringStreams(t *testing.T) {
	r, base := startReplica(t, func(c *Config) { c.Speed = 1 })
	c := client()
	prompt := strings.Repeat("the same long prompt ", 50)
	streamBody := fmt.Sprintf(`{"max_tokens":5000,"stream":true,"messages":[{"role":"user","content":%q}]}`, prompt)
	const streams, whole = 4, 2
	var ready, ended sync.WaitGroup
	errs := make(chan error, streams+whole)
	for range streams {
		ready.Add(1)
		ended.Go(func() { errs <- readAfterFirstToken(c, base, streamBody, ready.Done) })
	}
	ready.Wait()
	for range whole {
		ended.Go(func() {
			body := fmt.Sprintf(`{"max_tokens":5000,"messages":[{"role":"user","content":%q}]}`, prompt)
			resp, err := c.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				err = fmt.Errorf("whole request answered %d after a failure: %s", resp.StatusCode, b)
			}
			errs <- err
		})
	}
	waitRunning(t, r, streams+whole)
	r.Fail()
	ended.Wait()
	close(errs)
	for err := range errs {
		if err == nil || strings.Contains(err.Error(), "after a failure") {
			t.Errorf("in-flight request: %v", err)
		}
	}
	if resp, err := c.Get(base + "/health"); err == nil {
		resp.Body.Close()
		t.Errorf("health answered %d while down", resp.StatusCode)
	}
	if err := r.Recover(); err != nil {
		t.Fatal(err)
	}
	got := readCompletion(t, post(t, c, base+"/v1/chat/completions",
		fmt.Sprintf(`{"max_tokens":2,"messages":[{"role":"user","content":%q}]}`, prompt)))
	if got.Status != http.StatusOK || got.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("after recovery: status %d, usage %+v; want 200 and a cold cache", got.Status, got.Usage)
	}
}

// readAfterFirstToken streams a chat completion, calls running once the first token (or an
// error) arrives, and returns how the rest of the stream ended.
func readAfterFirstToken(c *http.Client, base, body string, running func()) error {
	resp, err := c.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		running()
		return err
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil || strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			break
		}
	}
	running()
	rest, err := io.ReadAll(br)
	if err == nil {
		err = fmt.Errorf("stream ended cleanly after a failure: ...%s", rest[max(len(rest)-40, 0):])
	}
	return err
}

// waitRunning blocks until the engine holds n requests, by asking the loop after each event.
func waitRunning(t *testing.T, r *Replica, n int) {
	t.Helper()
	for {
		var s snapshot
		if !r.do(func(c *core) { s = c.snapshot() }) {
			t.Fatal("replica stopped")
		}
		if s.Running+s.Waiting >= n {
			return
		}
		if t.Context().Err() != nil {
			t.Fatal("timed out")
		}
		runtime.Gosched()
	}
}

func TestAdminAPI(t *testing.T) {
	r, base := startReplica(t, nil)
	c := client()
	admin := func(path string) int {
		t.Helper()
		resp := post(t, c, base+path, "")
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/admin/errors?rate=1.5", 400}, {"/admin/errors?rate=x", 400}, {"/admin/slow?factor=0", 400},
		{"/admin/slow?factor=-1", 400}, {"/admin/fail?for=-1s", 400}, {"/admin/slow?factor=2", 200},
		{"/admin/errors?rate=0.5&status=200", 400}, {"/admin/errors?rate=0.5&status=x", 400},
		{"/admin/errors?rate=0.5", 200},
	} {
		if got := admin(tc.path); got != tc.status {
			t.Errorf("POST %s: status %d, want %d", tc.path, got, tc.status)
		}
	}
	var statuses []int
	for range 4 {
		got := readCompletion(t, post(t, c, base+"/v1/completions", `{"prompt":"hi","max_tokens":1}`))
		statuses = append(statuses, got.Status)
	}
	if fmt.Sprint(statuses) != "[200 500 200 500]" {
		t.Errorf("with error rate 0.5, statuses %v", statuses)
	}
	if got := admin("/admin/errors?rate=1&status=503"); got != 200 {
		t.Fatalf("errors with a status: %d", got)
	}
	if got := readCompletion(t, post(t, c, base+"/v1/completions", `{"prompt":"hi","max_tokens":1}`)); got.Status != 503 {
		t.Errorf("with error status 503: status %d", got.Status)
	}
	if got := admin("/admin/errors?rate=0.5"); got != 200 {
		t.Fatalf("errors: %d", got)
	}
	resp, err := c.Get(base + "/admin/state")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"down":false,"slowdown":2,"error_rate":0.5}`; string(b) != want {
		t.Errorf("state %s, want %s", b, want)
	}
	if got := admin("/admin/fail"); got != 200 {
		t.Fatalf("fail: status %d", got)
	}
	if _, err := c.Get(base + "/health"); err == nil {
		t.Error("the listener is still open after /admin/fail")
	}
	if err := r.Recover(); err != nil {
		t.Fatal(err)
	}
	if got := admin("/admin/errors?rate=0"); got != 200 {
		t.Errorf("after recovery: status %d", got)
	}
}

func TestFailBeforeStartAndClose(t *testing.T) {
	r, err := NewReplica(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r.Fail()
	if err := r.Recover(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := r.Start(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	rec := serve(r, chatRequest("hi", 1))
	if rec.status != http.StatusServiceUnavailable {
		t.Errorf("request after Close: status %d, want 503", rec.status)
	}
}
