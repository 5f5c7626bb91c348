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
	"kvroute/internal/nettest"
	"kvroute/sweep"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fullConfig is a route config that sets every key, in the current spelling.
const fullConfig = `
listen: 0.0.0.0:9000
admin_listen: 127.0.0.1:9090
drain_delay: 2s
drain_timeout: 5s
log_level: debug
server: {read_header_timeout: 5s, read_body_timeout: 6s, write_timeout: 7s, idle_timeout: 1m, max_header_bytes: 4096, max_connections: 50, max_connections_per_client: 20}
policy: {name: prefix-cache, imbalance_abs: 8}
seed: 7
backends: [a=http://a:8000, http://b:8000]
api_keys: [secret]
debug_headers: true
health: {metrics_interval: 100ms, scrape_timeout: 2s, failure_threshold: 5, max_backoff: 5s, models_interval: 30s}
timeouts: {header: 10s, first_byte: 20s, idle: 30s}
limits: {max_body_bytes: 1048576, max_retries: 1}
kv_events: {connect: [a=tcp://a:5557, tcp://b:5557], replay: [a=tcp://a:5558], bind: tcp://0.0.0.0:5559, forward: tcp://0.0.0.0:5600,
  bootstrap_from: [http://router-1:9090], bootstrap_timeout: 3s, block_size: 64}
tokenize: {remote: true, cache_entries: 10, cache_bytes: 1048576, max_tokens: 4096, timeout: 1s, cooldown: 3s}
`

func TestLoadConfig(t *testing.T) {
	full := writeFile(t, "full.yaml", fullConfig)
	old := strings.NewReplacer("policy: {name: prefix-cache, imbalance_abs: 8}", "policy: prefix-cache\npolicy_params: {imbalance_abs: 8}",
		"metrics_interval", "scrape_interval").Replace(fullConfig)
	want := gateway.Config{
		Policy: "prefix-cache", PolicyParams: map[string]any{"imbalance_abs": 8}, Seed: sweep.RouterSeed(7),
		Backends: []string{"a=http://a:8000", "http://b:8000"}, APIKeys: []string{"secret"}, DebugHeaders: true,
		Health:   gateway.HealthConfig{MetricsInterval: 100 * time.Millisecond, ScrapeTimeout: 2 * time.Second, FailureThreshold: 5, MaxBackoff: 5 * time.Second, ModelsInterval: 30 * time.Second},
		Timeouts: gateway.TimeoutsConfig{Header: 10 * time.Second, FirstByte: 20 * time.Second, Idle: 30 * time.Second, Request: 30 * time.Minute},
		Limits:   gateway.LimitsConfig{MaxBodyBytes: 1 << 20, MaxRetries: 1},
		KVEvents: gateway.KVEventsConfig{Connect: []string{"a=tcp://a:5557", "tcp://b:5557"}, Replay: []string{"a=tcp://a:5558"},
			Bind: "tcp://0.0.0.0:5559", Forward: "tcp://0.0.0.0:5600", BootstrapFrom: []string{"http://router-1:9090"}, BootstrapTimeout: 3 * time.Second, BlockSize: 64},
		Tokenize: gateway.TokenizeConfig{Remote: true, CacheEntries: 10, CacheBytes: 1 << 20, MaxTokens: 4096, Timeout: time.Second, Cooldown: 3 * time.Second},
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
			if len(c.deprecated) != 0 {
				t.Errorf("deprecation warnings %q for a config in the current spelling", c.deprecated)
			}
			if c.Listen != "0.0.0.0:9000" || c.AdminListen != "127.0.0.1:9090" || c.DrainDelay != 2*time.Second || c.DrainTimeout != 5*time.Second || c.LogLevel != "debug" {
				t.Errorf("process settings %+v", c)
			}
			want := gateway.ServerConfig{ReadHeaderTimeout: 5 * time.Second, ReadBodyTimeout: 6 * time.Second, WriteTimeout: 7 * time.Second,
				IdleTimeout: time.Minute, MaxHeaderBytes: 4096, MaxConnections: 50, MaxConnectionsPerClient: 20}
			if c.Server != want {
				t.Errorf("server %+v, want %+v", c.Server, want)
			}
		}, ""},
		{"deprecated spellings", []string{"-config", writeFile(t, "old.yaml", old)}, func(t *testing.T, c fileConfig) {
			if diff := cmp.Diff(want, c.Gateway); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got := strings.Join(c.deprecated, "\n"); !strings.Contains(got, "policy_params") || !strings.Contains(got, "health.scrape_interval") {
				t.Errorf("warnings %q: want one for policy_params and one for health.scrape_interval", got)
			}
		}, ""},
		{"policy_params without policy", []string{"-config", writeFile(t, "pp.yaml", "backends: [http://a:1]\npolicy_params: {prefix_weight: 3}\n")}, func(t *testing.T, c fileConfig) {
			if c.Gateway.Policy != "prefix-score" || fmt.Sprint(c.Gateway.PolicyParams) != "map[prefix_weight:3]" {
				t.Errorf("policy %q %v: want the default policy with the parameters", c.Gateway.Policy, c.Gateway.PolicyParams)
			}
		}, ""},
		{"flags in the current spelling", []string{"-config", full, "-policy", "{name: least-request}", "-metrics-interval", "20ms", "-seed", "3"}, func(t *testing.T, c fileConfig) {
			g := c.Gateway
			if g.Policy != "least-request" || g.PolicyParams != nil || g.Health.MetricsInterval != 20*time.Millisecond || g.Seed != sweep.RouterSeed(3) {
				t.Errorf("got %+v", g)
			}
			if len(c.deprecated) != 0 {
				t.Errorf("deprecation warnings %q", c.deprecated)
			}
		}, ""},
		{"policy flag with parameters", []string{"-backends", "http://a:1", "-policy", `{"name": "prefix-cache", "imbalance_abs": 8}`}, func(t *testing.T, c fileConfig) {
			if c.Gateway.Policy != "prefix-cache" || fmt.Sprint(c.Gateway.PolicyParams) != "map[imbalance_abs:8]" {
				t.Errorf("got %q %v", c.Gateway.Policy, c.Gateway.PolicyParams)
			}
		}, ""},
		{"flags override the file", []string{"-config", full, "-policy", "least-request", "-backends", "http://c:1", "-scrape-interval", "20ms", "-debug-headers=false", "-policy-params", `{"x":1}`,
			"-kv-events-connect", "http://c:1=tcp://c:5557", "-kv-events-replay", "", "-tokenize=false"}, func(t *testing.T, c fileConfig) {
			g := c.Gateway
			if g.Policy != "least-request" || strings.Join(g.Backends, ",") != "http://c:1" || g.Health.MetricsInterval != 20*time.Millisecond || g.DebugHeaders || fmt.Sprint(g.PolicyParams) != "map[x:1]" {
				t.Errorf("got %+v", g)
			}
			if g.Health.FailureThreshold != 5 {
				t.Errorf("flags not given must keep the file's values: %+v", g.Health)
			}
			if len(c.deprecated) != 2 {
				t.Errorf("warnings %q: want one for -scrape-interval and one for -policy-params", c.deprecated)
			}
			if fmt.Sprint(g.KVEvents.Connect, g.KVEvents.Replay, g.KVEvents.BlockSize, g.Tokenize.Remote) != "[http://c:1=tcp://c:5557] [] 64 false" {
				t.Errorf("kv events %+v, tokenize %+v", g.KVEvents, g.Tokenize)
			}
		}, ""},
		{"flags only", []string{"-backends", "http://a:1, http://b:2", "-policy", "prefix-score"}, func(t *testing.T, c fileConfig) {
			if strings.Join(c.Gateway.Backends, ",") != "http://a:1,http://b:2" || c.Gateway.Health.MetricsInterval != 50*time.Millisecond || c.Listen != "127.0.0.1:8080" {
				t.Errorf("got %+v", c)
			}
			if c.Server != gateway.DefaultServerConfig() || c.AdminListen != "" || c.Gateway.DebugHeaders {
				t.Errorf("server %+v, admin %q, debug headers %v: want the defaults", c.Server, c.AdminListen, c.Gateway.DebugHeaders)
			}
		}, ""},
		{"bad server limits", []string{"-config", writeFile(t, "lim.yaml", "backends: [http://a:1]\nserver: {max_header_bytes: 10, idle_timeout: -1s}\n")}, nil, "max_header_bytes 10"},
		{"zero connections", []string{"-config", writeFile(t, "conn.yaml", "backends: [http://a:1]\nserver: {max_connections: 0}\n")}, nil, "max_connections 0"},
		{"the old front-end switch", []string{"-config", writeFile(t, "old.yaml", "backends: [http://a:1]\nhttp_server: lean\n")}, nil, "field http_server not found"},
		{"admin on the main address", []string{"-backends", "http://a:1", "-listen", "127.0.0.1:1", "-admin-listen", "127.0.0.1:1"}, nil, "admin_listen"},
		{"bad backend name", []string{"-backends", "a b=http://a:1"}, nil, `name "a b"`},
		{"unknown field", []string{"-config", writeFile(t, "bad.yaml", "backends: [http://a:1]\nhealth: {scrape_intervall: 1s}\n")}, nil, "field scrape_intervall not found"},
		{"bad duration", []string{"-config", writeFile(t, "dur.yaml", "backends: [http://a:1]\ntimeouts: {idle: soon}\n")}, nil, "soon"},
		{"invalid values", []string{"-config", writeFile(t, "val.yaml", "backends: [ftp://a]\nlimits: {max_retries: -1}\n")}, nil, "limits.max_retries"},
		{"no backends", nil, nil, "backends: at least one required"},
		{"bad policy params", []string{"-backends", "http://a:1", "-policy-params", "[1]"}, nil, "-policy-params"},
		{"bad policy spec", []string{"-backends", "http://a:1", "-policy", "{block_size: 64}"}, nil, "-policy: sweep: line 1: policy: the mapping needs a name"},
		{"parameters twice", []string{"-backends", "http://a:1", "-policy", "{name: prefix-cache, imbalance_abs: 8}", "-policy-params", `{"imbalance_abs":9}`}, nil, "-policy already gives"},
		{"both interval flags", []string{"-backends", "http://a:1", "-metrics-interval", "1s", "-scrape-interval", "2s"}, nil, "give -metrics-interval only"},
		{"both interval keys", []string{"-config", writeFile(t, "two.yaml", "backends: [http://a:1]\nhealth: {metrics_interval: 1s, scrape_interval: 2s}\n")}, nil, "give metrics_interval only"},
		{"policy_params with a mapping", []string{"-config", writeFile(t, "pm.yaml", "backends: [http://a:1]\npolicy: {name: prefix-cache}\npolicy_params: {x: 1}\n")}, nil, "line 3: policy_params with a policy mapping"},
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

// TestAPIKeySources checks that keys come from the file's api_keys, the api_keys_file and
// $KVROUTE_API_KEYS together, and that no flag takes keys: a flag shows in the process list.
func TestAPIKeySources(t *testing.T) {
	keys := writeFile(t, "keys", "# router keys\nk-file-1\n\n  k-file-2  \n")
	cfg := writeFile(t, "route.yaml", "backends: [http://a:1]\napi_keys: [k-yaml]\napi_keys_file: "+keys+"\n")
	o, err := parseFlags([]string{"-config", cfg}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.getenv = func(name string) string { return map[string]string{keysEnv: "k-env-1, k-env-2"}[name] }
	c, err := o.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Gateway.APIKeys, ","); got != "k-yaml,k-file-1,k-file-2,k-env-1,k-env-2" {
		t.Errorf("keys %s", got)
	}
	bad := writeFile(t, "bad-keys", "ok\nhas space\n")
	o, _ = parseFlags([]string{"-backends", "http://a:1", "-api-keys-file", bad}, io.Discard)
	if _, err := o.load(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a key with a space: %v, want an error naming line 2", err)
	}
	if _, err := parseFlags([]string{"-api-keys", "secret"}, io.Discard); err == nil {
		t.Error("-api-keys accepted: keys on the command line show in ps")
	}
}

// startRoute runs the command with args until the test ends, and returns its address, the
// signal channel and the channel of its exit code.
func startRoute(t *testing.T, logs io.Writer, args ...string) (string, chan os.Signal, chan int) {
	t.Helper()
	signals, addrs, exit := make(chan os.Signal, 1), make(chan string, 1), make(chan int, 1)
	go func() {
		exit <- run(context.Background(), args, env{stdout: io.Discard, stderr: logs, signals: signals,
			listening: func(addr string) { addrs <- addr }})
	}()
	select {
	case addr := <-addrs:
		return "http://" + addr, signals, exit
	case code := <-exit:
		t.Fatalf("route exited with %d", code)
	}
	return "", nil, nil
}

// TestRunReloadAndDrain runs the command: it serves, reloads its backends on SIGHUP, and on
// SIGTERM answers /ready with 503 at once while it goes on serving on its open listener,
// waits for the stream in flight, and exits.
func TestRunReloadAndDrain(t *testing.T) {
	hold, started := make(chan struct{}), make(chan struct{}, 4)
	a, b := backend(t, "a", hold, started), backend(t, "b", hold, started)
	cfgPath := writeFile(t, "route.yaml", "listen: 127.0.0.1:0\npolicy: least-request\ndrain_delay: 0s\nbackends: ["+a.URL+"]\n")
	signals, addrs, reloads, exit := make(chan os.Signal), make(chan string, 1), make(chan error, 1), make(chan int, 1)
	var logs syncBuffer
	go func() {
		exit <- run(context.Background(), []string{"-config", cfgPath, "-debug-headers"}, env{stderr: &logs, signals: signals,
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

	if err := os.WriteFile(cfgPath, []byte("listen: 127.0.0.1:0\npolicy: least-request\ndrain_delay: 0s\nbackends: ["+b.URL+"]\n"), 0o644); err != nil {
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		// A new connection: the listener is still open, and /ready says the router drains.
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(base + "/ready")
		if err != nil {
			t.Fatalf("/ready while draining: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready still %d after SIGTERM", resp.StatusCode)
		}
	}
	if resp, err := post(false); err != nil || resp.StatusCode != 200 {
		t.Errorf("a request while draining: %v %v", resp, err)
	}
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

// TestServerSettings runs the command with a configured header limit: a request whose head
// exceeds it is answered 431 and a normal one still goes through.
func TestServerSettings(t *testing.T) {
	a := backend(t, "a", nil, nil)
	cfg := writeFile(t, "route.yaml", "listen: 127.0.0.1:0\nserver: {max_header_bytes: 2048, read_header_timeout: 2s}\nbackends: ["+a.URL+"]\n")
	base, signals, exit := startRoute(t, io.Discard, "-config", cfg, "-drain-delay", "0s")
	send := func(header int) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		for i := range header / 1000 {
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
}

// TestAdminListen serves /metrics on the admin address only, with no key there, while the
// main address asks clients for theirs.
func TestAdminListen(t *testing.T) {
	a := backend(t, "a", nil, nil)
	admin := nettest.FreeAddr(t)
	base, signals, exit := startRoute(t, io.Discard, "-listen", "127.0.0.1:0", "-admin-listen", admin, "-backends", a.URL,
		"-api-keys-file", writeFile(t, "keys", "k1\n"), "-drain-delay", "0s")
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for url, want := range map[string]int{
		base + "/metrics": 404, base + "/v1/models": 401, base + "/ready": 200,
		"http://" + admin + "/metrics": 200, "http://" + admin + "/ready": 200, "http://" + admin + "/v1/models": 404,
	} {
		if got := get(url); got != want {
			t.Errorf("GET %s: %d, want %d", url, got, want)
		}
	}
	signals <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Errorf("exit code %d", code)
	}
}
