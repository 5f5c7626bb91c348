package emulate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"kvroute/internal/emulate"
)

func Example() {
	cfg := emulate.DefaultConfig()
	cfg.Addr = "127.0.0.1:0" // any free port
	cfg.Speed = 100          // a hundred times faster than the simulated GPU
	r, err := emulate.NewReplica(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	body := `{"model":"llama-3.1-8b","max_tokens":4,"messages":[{"role":"user","content":"Say hi."}]}`
	resp, err := http.Post("http://"+r.Addr()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	i := strings.Index(string(b), `"choices"`)
	fmt.Println(resp.StatusCode, string(b[i:]))
	// Output:
	// 200 "choices":[{"index":0,"message":{"role":"assistant","content":"basi tomi pose fimu "},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":2,"total_tokens":6,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}}
}
