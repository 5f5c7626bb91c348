package emulate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/internal/openai"
	"kvroute/workloads"
)

func TestCompletions(t *testing.T) {
	_, base := startReplica(t, nil)
	c := client()
	hello := `"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hello"}]`
	promptTokens := len(tokenizeChat([]openai.Message{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "hello"}}))
	tests := []struct {
		name      string
		path      string
		body      string
		streamed  bool
		wantUsage bool
		prompt    int
		output    int
		objects   []string
	}{
		{"chat whole", "/v1/chat/completions", `{"model":"llama-3.1-8b","max_tokens":8,` + hello + `}`,
			false, true, promptTokens, 8, []string{"chat.completion"}},
		{"chat default max_tokens", "/v1/chat/completions", `{"model":"meta-llama/Llama-3.1-8B-Instruct",` + hello + `}`,
			false, true, promptTokens, 16, []string{"chat.completion"}},
		{"chat max_completion_tokens", "/v1/chat/completions", `{"max_completion_tokens":3,` + hello + `}`,
			false, true, promptTokens, 3, []string{"chat.completion"}},
		{"chat streamed with usage", "/v1/chat/completions",
			`{"model":"llama-3.1-8b","max_tokens":5,"stream":true,"stream_options":{"include_usage":true},` + hello + `}`,
			true, true, promptTokens, 5, []string{"chat.completion.chunk"}},
		{"chat streamed without usage", "/v1/chat/completions", `{"max_tokens":4,"stream":true,` + hello + `}`,
			true, false, promptTokens, 4, []string{"chat.completion.chunk"}},
		{"chat streamed one token", "/v1/chat/completions", `{"max_tokens":1,"stream":true,` + hello + `}`,
			true, false, promptTokens, 1, []string{"chat.completion.chunk"}},
		{"completion whole", "/v1/completions", `{"model":"llama-3.1-8b","prompt":"Once upon a time","max_tokens":6}`,
			false, true, 4, 6, []string{"text_completion"}},
		{"completion streamed", "/v1/completions",
			`{"prompt":"Once upon a time","max_tokens":7,"stream":true,"stream_options":{"include_usage":true}}`,
			true, true, 4, 7, []string{"text_completion"}},
		{"completion token ids", "/v1/completions", `{"prompt":[1,2,3,4,5,6,7,8,9],"max_tokens":2}`,
			false, true, 9, 2, []string{"text_completion"}},
		{"max_tokens capped", "/v1/completions", `{"prompt":"x","max_tokens":100000}`,
			false, true, 1, 4096, []string{"text_completion"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readCompletion(t, post(t, c, base+tc.path, tc.body))
			if got.Status != http.StatusOK {
				t.Fatalf("status %d: %s", got.Status, got.ErrorMessage)
			}
			if got.Finish != "length" {
				t.Errorf("finish_reason %q, want length", got.Finish)
			}
			if got.Done != tc.streamed {
				t.Errorf("[DONE] seen %v, want %v", got.Done, tc.streamed)
			}
			if tc.streamed && len(got.Pieces) != tc.output {
				t.Errorf("%d token events, want %d", len(got.Pieces), tc.output)
			}
			wantText := answer(promptSeed(promptIDs(t, tc.body)), 0, tc.output)
			if strings.Contains(tc.body, `"messages"`) {
				wantText = workloads.Words(chatAnswer(promptSeed(promptIDs(t, tc.body)), tc.output))
			}
			if got.Text != wantText {
				t.Errorf("text %q, want %q", got.Text, wantText)
			}
			if diff := cmp.Diff(tc.objects, dedupe(got.Objects)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if !tc.wantUsage {
				if got.Usage != nil {
					t.Errorf("usage %+v, want none", got.Usage)
				}
				return
			}
			want := &wireUsage{PromptTokens: tc.prompt, CompletionTokens: tc.output, TotalTokens: tc.prompt + tc.output}
			if diff := cmp.Diff(want, got.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

// promptIDs tokenizes a test body as the replica does.
func promptIDs(t *testing.T, body string) []int32 {
	t.Helper()
	parse := openai.ParseCompletion
	if strings.Contains(body, `"messages"`) {
		parse = openai.ParseChat
	}
	o, err := parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case o.Messages != nil:
		return tokenizeChat(o.Messages)
	case o.PromptTokens != nil:
		return o.PromptTokens
	}
	return tokenize(o.Prompt)
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func TestPrefixCacheHit(t *testing.T) {
	_, base := startReplica(t, nil)
	c := client()
	for _, n := range []int{15, 16, 17, 100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			text := strings.Repeat(fmt.Sprintf("%04d", n), n) // n tokens, unlike the other cases
			body := fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, text)
			first := readCompletion(t, post(t, c, base+"/v1/completions", body))
			second := readCompletion(t, post(t, c, base+"/v1/completions", body))
			wantCached := (n - 1) / 16 * 16
			got := []int{first.Usage.PromptTokens, first.Usage.PromptTokensDetails.CachedTokens,
				second.Usage.PromptTokens, second.Usage.PromptTokensDetails.CachedTokens}
			if diff := cmp.Diff([]int{n, 0, n, wantCached}, got); diff != "" {
				t.Errorf("prompt, cached of the first and second request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	_, base := startReplica(t, func(c *Config) { c.NumBlocks = 8; c.MaxBodyBytes = 1 << 10 })
	c := client()
	tests := []struct {
		name, method, path, body string
		status                   int
		param                    string
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"messages":[`, 400, ""},
		{"not an object", "POST", "/v1/completions", `[1,2]`, 400, ""},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"llama-3.1-8b"}`, 400, "messages"},
		{"no prompt", "POST", "/v1/completions", `{"max_tokens":3}`, 400, "prompt"},
		{"negative max_tokens", "POST", "/v1/completions", `{"prompt":"a","max_tokens":-1}`, 400, "max_tokens"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}]}`, 404, "model"},
		{"too long for the KV cache", "POST", "/v1/completions", fmt.Sprintf(`{"prompt":%q}`, strings.Repeat("a", 4*8*16)), 400, "prompt"},
		{"body too large", "POST", "/v1/completions", fmt.Sprintf(`{"prompt":%q}`, strings.Repeat("a", 2<<10)), 413, ""},
		{"wrong method", "GET", "/v1/completions", "", 405, ""},
		{"unknown path", "GET", "/v2/nothing", "", 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.method != "POST" {
				return
			}
			var e struct {
				Error struct {
					Message, Type string
					Param         *string
				}
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("not an OpenAI error body: %s", b)
			}
			if got := deref(e.Error.Param); got != tc.param {
				t.Errorf("param %q, want %q", got, tc.param)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestModelsAndHealth(t *testing.T) {
	_, base := startReplica(t, func(c *Config) { c.ServedModelName = "my-llama"; c.NumBlocks = 100 })
	c := client()
	resp, err := c.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("health: status %d", resp.StatusCode)
	}
	resp, err = c.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	models, err := openai.ParseModels(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []openai.Model{{ID: "my-llama", Object: "model", OwnedBy: "vllm", Root: "my-llama", MaxModelLen: 1600}}
	if diff := cmp.Diff(want, models, cmpIgnoreCreated); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	for _, model := range []string{"my-llama", "Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B-Instruct", ""} {
		got := readCompletion(t, post(t, c, base+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hi","max_tokens":1}`, model)))
		if got.Status != http.StatusOK {
			t.Errorf("model %q: status %d", model, got.Status)
		}
	}
}

var cmpIgnoreCreated = cmp.Transformer("created", func(m openai.Model) openai.Model { m.Created = 0; return m })

func TestConcurrentRequests(t *testing.T) {
	r, base := startReplica(t, func(c *Config) { c.Speed = 500 })
	c := client()
	const n = 64
	system := strings.Repeat("You are a helpful assistant. ", 40)
	var wg sync.WaitGroup
	results := make([]completion, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"max_tokens":%d,"stream":%v,"stream_options":{"include_usage":true},"messages":[`+
				`{"role":"system","content":%q},{"role":"user","content":"question %d"}]}`, 8+i%8, i%2 == 0, system, i)
			resp, err := c.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = tryReadCompletion(t, resp)
		})
	}
	wg.Wait()
	cached := 0
	for i, got := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if got.Usage == nil || got.Usage.CompletionTokens != 8+i%8 {
			t.Fatalf("request %d: usage %+v, want %d completion tokens", i, got.Usage, 8+i%8)
		}
		cached += got.Usage.PromptTokensDetails.CachedTokens
	}
	if cached == 0 {
		t.Error("no request hit the shared system prompt in the prefix cache")
	}
	var s snapshot
	r.do(func(c *core) { s = c.snapshot() })
	if s.Completed != n || s.Success != n || s.Running != 0 || s.Waiting != 0 || s.TTFT.count != n || s.E2E.count != n {
		t.Errorf("after all requests: completed %d, success %d, running %d, waiting %d, ttft samples %d, e2e samples %d; want %d done and none left",
			s.Completed, s.Success, s.Running, s.Waiting, s.TTFT.count, s.E2E.count, n)
	}
}

func TestDeterministicText(t *testing.T) {
	_, base := startReplica(t, nil)
	c := client()
	send := func(prompt string, stream bool) string {
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":12,"stream":%v}`, prompt, stream)
		return readCompletion(t, post(t, c, base+"/v1/completions", body)).Text
	}
	a, b, s, other := send("tell me a story", false), send("tell me a story", false), send("tell me a story", true), send("another story", false)
	if a != b || a != s {
		t.Errorf("the same request gave %q, %q and, streamed, %q", a, b, s)
	}
	if a == other {
		t.Errorf("different prompts gave the same text %q", a)
	}
}
