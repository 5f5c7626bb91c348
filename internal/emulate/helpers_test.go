package emulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// startReplica starts a replica on a free loopback port, closed at the end of the test.
func startReplica(t *testing.T, edit func(*Config)) (*Replica, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Speed = 200
	if edit != nil {
		edit(&cfg)
	}
	r, err := NewReplica(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r, "http://" + r.Addr()
}

// client is an HTTP client with its own connections and a deadline that turns a hang into a
// test failure.
func client() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}
}

func post(t *testing.T, c *http.Client, url, body string) *http.Response {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// completion is the part of a response body or stream the tests check.
type completion struct {
	Status       int
	Text         string   // the whole generated text
	Pieces       []string // streamed: the text of each token event
	Finish       string
	Usage        *wireUsage
	Done         bool // streamed: ended with data: [DONE]
	ErrorMessage string
	Objects      []string // the "object" of each body or event
}

type wireBody struct {
	Object  string `json:"object"`
	Choices []struct {
		Text    *string      `json:"text"`
		Message *wireMessage `json:"message"`
		Delta   *wireMessage `json:"delta"`
		Finish  *string      `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// absorb adds one body or event to c.
func (c *completion) absorb(t *testing.T, data []byte, streamed bool) {
	t.Helper()
	var b wireBody
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatalf("bad JSON %q: %v", data, err)
	}
	c.Objects = append(c.Objects, b.Object)
	if b.Error != nil {
		c.ErrorMessage = b.Error.Message
	}
	if b.Usage != nil {
		c.Usage = b.Usage
	}
	for _, ch := range b.Choices {
		text := ""
		switch {
		case ch.Text != nil:
			text = *ch.Text
		case ch.Message != nil && ch.Message.Content != nil:
			text = *ch.Message.Content
		case ch.Delta != nil && ch.Delta.Content != nil:
			text = *ch.Delta.Content
		}
		if streamed && text != "" {
			c.Pieces = append(c.Pieces, text)
		}
		c.Text += text
		if ch.Finish != nil {
			c.Finish = *ch.Finish
		}
	}
}

// readCompletion reads a whole or streamed response; it fails the test if the body breaks off.
func readCompletion(t *testing.T, resp *http.Response) completion {
	t.Helper()
	c, err := tryReadCompletion(t, resp)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tryReadCompletion(t *testing.T, resp *http.Response) (completion, error) {
	t.Helper()
	defer resp.Body.Close()
	c := completion{Status: resp.StatusCode}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return c, err
		}
		c.absorb(t, b, false)
		return c, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		switch {
		case !ok:
		case c.Done:
			t.Errorf("event after [DONE]: %s", data)
		case string(data) == "[DONE]":
			c.Done = true
		default:
			c.absorb(t, data, true)
		}
	}
	return c, sc.Err()
}

// write is one Write call on a recorder.
type write struct {
	at   time.Time
	data string
}

// recorder is an http.ResponseWriter that records when each write happened, for tests that
// call ServeHTTP inside a synctest bubble.
type recorder struct {
	mu      sync.Mutex
	header  http.Header
	status  int
	body    bytes.Buffer
	writes  []write
	aborted bool
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.writes = append(r.writes, write{time.Now(), string(p)})
	return r.body.Write(p)
}

func (r *recorder) Flush() {}

// serve runs h on req into a new recorder, noting an aborted handler instead of panicking.
func serve(h http.Handler, req *http.Request) *recorder {
	rec := newRecorder()
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				rec.mu.Lock()
				rec.aborted = true
				rec.mu.Unlock()
			}
		}()
		h.ServeHTTP(rec, req)
	}()
	return rec
}

// events returns each "data:" event of a recorded stream with the time it was written.
func (r *recorder) events() (data []string, at []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.writes {
		for _, ev := range strings.Split(w.data, "\n\n") {
			if d, ok := strings.CutPrefix(ev, "data: "); ok {
				data, at = append(data, d), append(at, w.at)
			}
		}
	}
	return data, at
}

// checkGolden compares got with testdata/name, which -update rewrites.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("page (-golden +got):\n%s", diff)
	}
}
