package tokenize

import (
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dialAttempts counts HTTP requests made by anything in this test binary.
var dialAttempts atomic.Int64

// errNoNetwork is what the test transport answers every request with.
var errNoNetwork = errors.New("tokenize test: network access attempted")

type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	dialAttempts.Add(1)
	return nil, errNoNetwork
}

// TestMain cuts this test binary off the network before any test can build
// the encoder: the default HTTP transport fails, proxies point at a closed
// port, and tiktoken-go's download cache is an empty directory. A
// tokenizer that tried to fetch its ranks would fail or be counted.
func TestMain(m *testing.M) {
	http.DefaultTransport = noNetwork{}
	cache, err := os.MkdirTemp("", "tokenize-cache")
	if err != nil {
		panic(err)
	}
	for k, v := range map[string]string{
		"HTTP_PROXY": "http://127.0.0.1:1", "HTTPS_PROXY": "http://127.0.0.1:1",
		"http_proxy": "http://127.0.0.1:1", "https_proxy": "http://127.0.0.1:1",
		"NO_PROXY": "", "no_proxy": "",
		"TIKTOKEN_CACHE_DIR": cache, "DATA_GYM_CACHE_DIR": cache,
	} {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(cache)
	os.Exit(code)
}

func TestNetworkIsCutOff(t *testing.T) {
	before := dialAttempts.Load()
	if _, err := http.Get("https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"); !errors.Is(err, errNoNetwork) {
		t.Fatalf("http.Get error = %v, want the test transport's refusal", err)
	}
	if dialAttempts.Load() != before+1 {
		t.Fatal("the test transport did not see the request")
	}
}

// TestTiktokenOffline checks exact cl100k_base ids with the network cut off,
// proving the ranks come from the embedded loader.
func TestTiktokenOffline(t *testing.T) {
	before := dialAttempts.Load()
	tk, err := NewTiktoken()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want []int
	}{
		{text: "", want: []int{}},
		{text: "hello world", want: []int{15339, 1917}},
		{text: "Hello, world!", want: []int{9906, 11, 1917, 0}},
		{text: "tiktoken is great!", want: []int{83, 1609, 5963, 374, 2294, 0}},
		{text: " ", want: []int{220}},
		{text: "<|endoftext|>", want: []int{27, 91, 8862, 728, 428, 91, 29}}, // special tokens stay text
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			got := tk.Encode(tc.text)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode (-want +got):\n%s", diff)
			}
			if n := tk.Count(tc.text); n != len(tc.want) {
				t.Errorf("Count = %d, want %d", n, len(tc.want))
			}
		})
	}
	if n := dialAttempts.Load() - before; n != 0 {
		t.Errorf("building and using the encoder made %d HTTP requests", n)
	}
}
