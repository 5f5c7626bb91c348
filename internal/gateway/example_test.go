package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"kvroute/internal/gateway"
)

// Example puts a gateway in front of a stand-in model server and sends it a chat request.
func Example() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprintln(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.1")
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model"}]}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"Hi!"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
		}
	}))
	defer backend.Close()

	cfg := gateway.DefaultConfig()
	cfg.Policy = "prefix-score"
	cfg.Backends = []string{backend.URL}
	g, err := gateway.New(cfg, gateway.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Probe(ctx) // learn the backends' load and models before serving
	go func() { _ = g.Run(ctx) }()

	front := httptest.NewServer(g)
	defer front.Close()
	resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"llama-3.1-8b","messages":[{"role":"user","content":"Hello"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println(g.Backends()[0].Ready, g.Backends()[0].Models)
	// Output:
	// 200 {"choices":[{"message":{"role":"assistant","content":"Hi!"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}
	// true [llama-3.1-8b]
}

// ExampleServer serves a handler with net/http's server under a ServerConfig's limits, as
// cmd/route serves a Gateway, and shuts it down.
func ExampleServer() {
	srv, err := gateway.NewServer(gateway.DefaultServerConfig(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/health")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.ContentLength, string(body))
	fmt.Println(srv.Shutdown(context.Background()), <-served)
	// Output:
	// 200 11 GET /health
	// <nil> http: Server closed
}
