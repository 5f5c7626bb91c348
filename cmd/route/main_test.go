package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/internal/gateway"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfig(t *testing.T) {
	full := writeFile(t, "full.yaml", `
listen: 0.0.0.0:9000
drain_timeout: 5s
log_level: debug
http_server: std
server: {read_header_timeout: 5s, idle_timeout: 1m, max_header_bytes: 4096}
policy: prefix-cache
policy_params: {imbalance_abs: 8}
seed: 7
backends: [http://a:8000, http://b:8000]
api_keys: [secret]
health: {scrape_interval: 100ms, scrape_timeout: 2s, failure_threshold: 5, max_backoff: 5s, models_interval: 30s}
timeouts: {header: 10s, first_byte: 20s, idle: 30s}
limits: {max_body_bytes: 1048576, max_retries: 1}
`)
	want := gateway.Config{
		Policy: "prefix-cache", PolicyParams: map[string]any{"imbalance_abs": 8}, Seed: 7,
		Backends: []string{"http://a:8000", "http://b:8000"}, APIKeys: []string{"secret"},
		Health:   gateway.HealthConfig{ScrapeInterval: 100 * time.Millisecond, ScrapeTimeout: 2 * time.Second, FailureThreshold: 5, MaxBackoff: 5 * time.Second, ModelsInterval: 30 * time.Second},
		Timeouts: gateway.TimeoutsConfig{Header: 10 * time.Second, FirstByte: 20 * time.Second, Idle: 30 * time.Second},
		Limits:   gateway.LimitsConfig{MaxBodyBytes: 1 << 20, MaxRetries: 1},
	}
	cases := []struct {
		name    string
		args    []string
		check   func(t *testing.T, c fileConfig)
		wantErr string
	}{
		{"file", []string{"-config", full}, func(t *testing.T, c fileConfig) {
			if diff := cmp.Diff(want, c.Gateway); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if c.Listen != "0.0.0.0:9000" || c.DrainTimeout != 5*time.Second || c.LogLevel != "debug" || c.HTTPServer != "std" {
				t.Errorf("process settings %+v", c)
			}
			if want := (gateway.ServerConfig{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 4096}); c.Server != want {
				t.Errorf("server %+v, want %+v", c.Server, want)
			}
		}, ""},
		{"flags override the file", []string{"-config", full, "-policy", "least-request", "-backends", "http://c:1", "-scrape-interval", "20ms", "-api-keys", "", "-policy-params", `{"x":1}`}, func(t *testing.T, c fileConfig) {
			g := c.Gateway
			if g.Policy != "least-request" || strings.Join(g.Backends, ",") != "http://c:1" || g.Health.ScrapeInterval != 20*time.Millisecond || len(g.APIKeys) != 0 || fmt.Sprint(g.PolicyParams) != "map[x:1]" {
				t.Errorf("got %+v", g)
			}
			if g.Health.FailureThreshold != 5 {
				t.Errorf("flags not given must keep the file's values: %+v", g.Health)
			}
		}, ""},
		{"flags only", []string{"-backends", "http://a:1, http://b:2", "-policy", "prefix-score"}, func(t *testing.T, c fileConfig) {
			if strings.Join(c.Gateway.Backends, ",") != "http://a:1,http://b:2" || c.Gateway.Health.ScrapeInterval != 50*time.Millisecond || c.Listen != "127.0.0.1:8080" {
				t.Errorf("got %+v", c)
			}
			if c.HTTPServer != "lean" || c.Server != gateway.DefaultServerConfig() {
				t.Errorf("front end %q %+v, want lean and the defaults", c.HTTPServer, c.Server)
			}
		}, ""},
		{"flag overrides http_server", []string{"-config", full, "-http-server", "lean"}, func(t *testing.T, c fileConfig) {
			if c.HTTPServer != "lean" || c.Server.MaxHeaderBytes != 4096 {
				t.Errorf("front end %q %+v", c.HTTPServer, c.Server)
			}
		}, ""},
		{"bad http_server", []string{"-config", writeFile(t, "srv.yaml", "backends: [http://a:1]\nhttp_server: nginx\n")}, nil, `http-server "nginx"`},
		{"bad server limits", []string{"-config", writeFile(t, "lim.yaml", "backends: [http://a:1]\nserver: {max_header_bytes: 10, idle_timeout: -1s}\n")}, nil, "max_header_bytes 10"},
		{"unknown field", []string{"-config", writeFile(t, "bad.yaml", "backends: [http://a:1]\nhealth: {scrape_intervall: 1s}\n")}, nil, "field scrape_intervall not found"},
		{"bad duration", []string{"-config", writeFile(t, "dur.yaml", "backends: [http://a:1]\ntimeouts: {idle: soon}\n")}, nil, "soon"},
		{"invalid values", []string{"-config", writeFile(t, "val.yaml", "backends: [ftp://a]\nlimits: {max_retries: -1}\n")}, nil, "limits.max_retries"},
		{"no backends", nil, nil, "backends: at least one required"},
		{"bad policy params", []string{"-backends", "http://a:1", "-policy-params", "[1]"}, nil, "-policy-params"},
		{"missing file", []string{"-config", "/nonexistent.yaml"}, nil, "nonexistent"},
		{"bad log level", []string{"-backends", "http://a:1", "-log-level", "loud"}, nil, "log_level"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			c, err := o.load()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// backend is a minimal vLLM stand-in whose streams wait on hold after their first token.
func backend(t *testing.T, name string, hold chan struct{}, started chan<- struct{}) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprint(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n")
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		default:
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Backend", name)
			if !bytes.Contains(body, []byte(`"stream":true`)) {
				fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"}}]}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
			w.(http.Flusher).Flush()
			started <- struct{}{}
			<-hold
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// syncBuffer is a log sink safe for the router's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunReloadAndDrain runs the command: it serves, reloads its backends on SIGHUP, and on
// SIGTERM waits for the stream in flight before it exits.
func TestRunReloadAndDrain(t *testing.T) {
	for _, server := range []string{"lean", "std"} {
		t.Run(server, func(t *testing.T) { testRunReloadAndDrain(t, server) })
	}
}

func testRunReloadAndDrain(t *testing.T, server string) {
	hold, started := make(chan struct{}), make(chan struct{}, 4)
	a, b := backend(t, "a", hold, started), backend(t, "b", hold, started)
	cfgPath := writeFile(t, "route.yaml", "listen: 127.0.0.1:0\npolicy: least-request\nbackends: ["+a.URL+"]\n")
	signals, addrs, reloads, exit := make(chan os.Signal), make(chan string, 1), make(chan error, 1), make(chan int, 1)
	var logs syncBuffer
	go func() {
		exit <- run(context.Background(), []string{"-config", cfgPath, "-http-server", server}, env{stderr: &logs, signals: signals,
			listening: func(addr string) { addrs <- addr }, reloaded: func(err error) { reloads <- err }})
	}()
	base := "http://" + <-addrs
	post := func(stream bool) (*http.Response, error) {
		body := `{"model":"m","messages":[{"role":"user","content":"x"}]` + map[bool]string{true: `,"stream":true}`, false: `}`}[stream]
		return http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	}
	if resp, err := post(false); err != nil || resp.Header.Get("X-Backend") != "a" {
		t.Fatalf("first request: %v %v", resp, err)
	}

	if err := os.WriteFile(cfgPath, []byte("listen: 127.0.0.1:0\npolicy: least-request\nbackends: ["+b.URL+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	signals <- syscall.SIGHUP
	if err := <-reloads; err != nil {
		t.Fatal(err)
	}
	stream, err := post(true)
	if err != nil || stream.Header.Get("X-Backend") != "b" {
		t.Fatalf("after reload: %v %v", stream, err)
	}
	<-started
	signals <- syscall.SIGTERM
	select {
	case code := <-exit:
		t.Fatalf("exited with %d while a stream was in flight", code)
	default:
	}
	close(hold)
	rest, _ := io.ReadAll(stream.Body)
	stream.Body.Close()
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("stream cut by the drain: %q", rest)
	}
	if code := <-exit; code != 0 {
		t.Errorf("exit code %d; log:\n%s", code, logs.String())
	}
	for _, want := range []string{"configuration reloaded", "draining", "drained"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

func TestHTTPServerFlag(t *testing.T) {
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"-http-server", "nginx"}, &stderr); err == nil || !strings.Contains(stderr.String(), "want lean or std") {
		t.Fatalf("-http-server nginx: err %v, stderr %q", err, stderr.String())
	}
	for _, ok := range []string{"lean", "std"} {
		if o, err := parseFlags([]string{"-http-server", ok}, io.Discard); err != nil || o.httpServer != ok {
			t.Errorf("-http-server %s: %v", ok, err)
		}
	}
}

// TestServerSettings runs the command with a configured header limit: under either front end
// a request whose head exceeds it is answered 431 and a normal one still goes through.
func TestServerSettings(t *testing.T) {
	for _, server := range []string{"lean", "std"} {
		t.Run(server, func(t *testing.T) {
			a := backend(t, "a", nil, nil)
			cfg := writeFile(t, "route.yaml", "listen: 127.0.0.1:0\nhttp_server: "+server+
				"\nserver: {max_header_bytes: 2048, read_header_timeout: 2s}\nbackends: ["+a.URL+"]\n")
			signals, addrs, exit := make(chan os.Signal), make(chan string, 1), make(chan int, 1)
			go func() {
				exit <- run(context.Background(), []string{"-config", cfg}, env{stderr: io.Discard, signals: signals,
					listening: func(addr string) { addrs <- addr }})
			}()
			url := "http://" + <-addrs + "/v1/chat/completions"
			send := func(header int) int {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
				for i := range header / 1000 { // lines of 1,000 bytes: under the lean server's 8 KB line limit
					req.Header.Set(fmt.Sprintf("X-Padding-%d", i), strings.Repeat("p", 1000))
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := send(16 << 10); code != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("16 KB of headers: status %d, want 431", code)
			}
			if code := send(1000); code != http.StatusOK {
				t.Errorf("1 KB header: status %d, want 200", code)
			}
			signals <- syscall.SIGTERM
			if code := <-exit; code != 0 {
				t.Errorf("exit code %d", code)
			}
		})
	}
}
