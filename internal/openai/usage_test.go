package openai

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseUsage(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		want   Usage
		wantOK bool
	}{
		{"full", `{"id":"x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}`, Usage{10, 3, 8}, true},
		{"no details", `{"usage":{"prompt_tokens":1,"completion_tokens":2}}`, Usage{1, 2, 0}, true},
		{"null", `{"usage":null}`, Usage{}, false},
		{"absent", `{"choices":[]}`, Usage{}, false},
		{"garbage", `nope`, Usage{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseUsage([]byte(tc.body))
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// chatStream is a vLLM-shaped chat stream: a role chunk, two tokens, a finish chunk and, with
// include_usage, a usage-only chunk.
const chatStream = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
	"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
	"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n" +
	"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"

func TestStreamScanner(t *testing.T) {
	usage := "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n"
	cases := []struct {
		name         string
		stream       string
		wantUsage    Usage
		wantReported bool
		wantDone     bool
		wantFailed   bool
	}{
		{"with usage", chatStream + usage + "data: [DONE]\n\n", Usage{7, 2, 4}, true, true, false},
		{"counted", chatStream + "data: [DONE]\n\n", Usage{CompletionTokens: 2}, false, true, false},
		{"crlf completions", "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\ndata: [DONE]\r\n\r\n", Usage{CompletionTokens: 1}, false, true, false},
		{"truncated", chatStream[:60], Usage{}, false, false, false},
		{"error event", chatStream + "data: {\"error\":{\"message\":\"boom\"}}\n\n", Usage{CompletionTokens: 2}, false, false, true},
	}
	for _, tc := range cases {
		for _, size := range []int{1, 7, 64, 1 << 16} {
			t.Run(tc.name, func(t *testing.T) {
				var s StreamScanner
				for p := tc.stream; len(p) > 0; {
					n := min(size, len(p))
					_, _ = s.Write([]byte(p[:n]))
					p = p[n:]
				}
				u, rep := s.Usage()
				got := []any{u, rep, s.Done(), s.Failed()}
				want := []any{tc.wantUsage, tc.wantReported, tc.wantDone, tc.wantFailed}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("piece size %d (-want +got):\n%s", size, diff)
				}
			})
		}
	}
}

func TestStreamScannerLongLine(t *testing.T) {
	var s StreamScanner
	_, _ = s.Write([]byte("data: {\"choices\":[{\"text\":\"" + strings.Repeat("x", maxLine) + "\"}]}\n\n"))
	_, _ = s.Write([]byte("data: [DONE]\n\n"))
	if !s.Done() {
		t.Error("a skipped long line hid the [DONE] after it")
	}
	s.Reset()
	if s.Done() {
		t.Error("Reset kept state")
	}
}

func TestErrorBody(t *testing.T) {
	e := &Error{Status: 404, Message: `model "x" not found`, Type: TypeInvalidRequest, Param: "model", Code: "model_not_found"}
	want := `{"error":{"message":"model \"x\" not found","type":"invalid_request_error","param":"model","code":"model_not_found"}}`
	if got := string(e.AppendJSON(nil)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	e = &Error{Message: "down", Type: TypeServer}
	want = "data: {\"error\":{\"message\":\"down\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"
	if got := string(e.AppendEvent(nil)); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestCheckStream(t *testing.T) {
	cases := []struct {
		name, body string
		ok         bool
	}{
		{"done", chatStream + "data: [DONE]\n\n", true},
		{"crlf", "data: {\"a\":1}\r\n\r\ndata: [DONE]\r\n\r\n", true},
		{"error event", chatStream + "data: {\"error\":{\"message\":\"x\"}}\n\n", true},
		{"no done", chatStream, false},
		{"partial event then error", "data: {\"choi" + "data: {\"error\":{}}\n\n", false},
		{"chunk framing", "1a9\r\ndata: {\"a\":1}\n\ndata: [DONE]\n\n", false},
		{"comment and fields", ": keep-alive\n\nevent: x\nid: 3\ndata: {}\n\ndata: [DONE]\n\n", true},
		{"framing inside data", "data: 1a9\r\n\r\ndata: [DONE]\n\n", false},
		{"after done", "data: [DONE]\n\ndata: {}\n\n", false},
		{"unended", "data: [DONE]\n", false},
		{"two data lines", "data: {}\ndata: {}\n\ndata: [DONE]\n\n", false},
		{"empty", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckStream([]byte(tc.body)); (err == nil) != tc.ok {
				t.Errorf("CheckStream = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
