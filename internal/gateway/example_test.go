package gateway_test

import (
	"context"
	"fmt"
	"io"
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
