package workloads

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

const shareGPTFixture = "testdata/sharegpt_small.json"

func TestShareGPTReaderFixture(t *testing.T) {
	f, err := openFile(shareGPTFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := NewShareGPTReader(f, shareGPTFixture)
	var ids []string
	for {
		c, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	want := []string{"c1-normal", "c2-short-prompt", "c3-one-message", "c4-system", "c5-long-prompt",
		"c6-starts-with-gpt", "c7-short-answer", "c8-unknown-role", "c9-consecutive", "c10-unicode"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("conversations (-want +got):\n%s", diff)
	}
}

func TestShareGPTReaderErrors(t *testing.T) {
	tests := []struct {
		name, data string
		record     int
		field      string
		msg        string
	}{
		{name: "empty", data: "", msg: "want a JSON array"},
		{name: "object", data: `{"id": "x"}`, msg: "want a JSON array"},
		{name: "bad-from", data: `[{"id": "a", "conversations": []}, {"id": "b", "conversations": [{"from": 7, "value": "x"}]}]`,
			record: 2, field: "conversations.from", msg: "want string, got JSON number"},
		{name: "bad-value", data: `[{"conversations": [{"from": "human", "value": ["x"]}]}]`, record: 1, field: "conversations.value"},
		{name: "not-object", data: `[{"conversations": []}, 42]`, record: 2, msg: "want workloads.ShareGPTConversation"},
		{name: "truncated", data: `[{"conversations": [{"from": "human", "val`, record: 1, msg: "malformed"},
		{name: "missing-comma", data: `[{"id": "a"} {"id": "b"}]`, record: 2, msg: "expected comma"},
		{name: "trailing", data: `[] []`, msg: "data after the closing"},
		{name: "syntax", data: `[{"id": "a",}]`, record: 1, msg: "invalid character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd := NewShareGPTReader(strings.NewReader(tc.data), "bad.json")
			var err error
			for err == nil {
				_, err = rd.Next()
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if pe.File != "bad.json" || pe.Record != tc.record || pe.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q: record %d field %q, want record %d field %q mentioning %q",
					err, pe.Record, pe.Field, tc.record, tc.field, tc.msg)
			}
			if _, again := rd.Next(); again != err {
				t.Errorf("second Next = %v, want the same error", again)
			}
		})
	}
}

func TestShareGPTShuffle(t *testing.T) {
	run := func(seed uint64, shuffle bool) []string {
		cfg := Config{Workload: WorkloadConfig{Kind: KindShareGPT, Path: shareGPTFixture, Shuffle: &shuffle}}
		var heads []string
		drive(t, mustBuild(t, cfg, seed), fixedService(time.Second), func(r Request) { heads = append(heads, r.Text) })
		return heads
	}
	a, b, c := run(1, true), run(1, true), run(2, true)
	if !cmp.Equal(a, b) {
		t.Error("same seed, different order")
	}
	if cmp.Equal(a, c) {
		t.Error("different seeds, same order")
	}
	ordered := run(1, false)
	if cmp.Equal(a, ordered) || len(a) != len(ordered) {
		t.Errorf("shuffled %d requests vs ordered %d: want a different order of the same requests", len(a), len(ordered))
	}
}

func TestShareGPTTokenizerAndFilters(t *testing.T) {
	// With 1 byte per token, prompts of 4 bytes or more pass; the long prompt is still too long.
	cfg := Config{Workload: WorkloadConfig{Kind: KindShareGPT, Path: shareGPTFixture, MaxPromptTokens: 60, MaxTotalTokens: 200}}
	s := mustBuild(t, cfg, 1, WithTokenizer(ChunkTokenizer{ChunkBytes: 1}))
	for _, r := range drive(t, s, fixedService(time.Second), nil) {
		if len(r.Tokens) != len(r.Text) || len(r.Tokens) > 60 || len(r.Tokens)+r.OutputTokens > 200 {
			t.Errorf("%s: %d tokens for %d bytes, output %d: outside the filters", r.ID, len(r.Tokens), len(r.Text), r.OutputTokens)
		}
	}
}

// nonSeekable hides everything but Read and Close.
type nonSeekable struct{ io.ReadCloser }

func TestShareGPTOpeners(t *testing.T) {
	fsys := fstest.MapFS{"d.json": {Data: []byte(`[{"conversations": [{"from": "human", "value": "What is a fish?"}, {"from": "gpt", "value": "An animal that swims."}]}]`)}}
	open := func(p string) (io.ReadCloser, error) { return fsys.Open(p) }
	cfg := Config{Workload: WorkloadConfig{Kind: KindShareGPT, Path: "d.json"}}
	if got := len(drive(t, mustBuild(t, cfg, 1, WithOpener(open)), fixedService(0), nil)); got != 1 {
		t.Errorf("fstest file: %d requests, want 1", got)
	}
	hide := func(p string) (io.ReadCloser, error) {
		f, err := fsys.Open(p)
		return nonSeekable{f}, err
	}
	if _, err := Build(cfg, 1, WithOpener(hide)); !errors.Is(err, ErrNotSeekable) {
		t.Errorf("shuffling a pipe: error %v, want ErrNotSeekable", err)
	}
	no := false
	cfg.Workload.Shuffle = &no
	if got := len(drive(t, mustBuild(t, cfg, 1, WithOpener(hide)), fixedService(0), nil)); got != 1 {
		t.Errorf("in-order pipe: %d requests, want 1", got)
	}
	cfg.Workload.Path = "missing.json"
	if _, err := Build(cfg, 1, WithOpener(open)); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: error %v, want one naming the file", err)
	}
}

func TestShareGPTMalformedMidStream(t *testing.T) {
	fsys := fstest.MapFS{"d.json": {Data: []byte(`[{"conversations": [{"from": "human", "value": "What is a fish?"}, {"from": "gpt", "value": "An animal that swims."}]},` +
		"\n" + `{"conversations": [{"from": "human", "value": 3}]}]`)}}
	open := func(p string) (io.ReadCloser, error) { return fsys.Open(p) }
	no := false
	cfg := Config{Workload: WorkloadConfig{Kind: KindShareGPT, Path: "d.json", Shuffle: &no}}
	s := mustBuild(t, cfg, 1, WithOpener(open))
	if _, ok := s.Next(); !ok {
		t.Fatal("first conversation missing")
	}
	if _, ok := s.Next(); ok {
		t.Fatal("malformed conversation produced a request")
	}
	var pe *ParseError
	if err := s.Err(); !errors.As(err, &pe) || pe.Record != 2 || pe.Field != "conversations.value" {
		t.Errorf("Err() = %v, want record 2 field conversations.value", err)
	}
	yes := true
	cfg.Workload.Shuffle = &yes // shuffling indexes the whole file first, so Build fails
	if _, err := Build(cfg, 1, WithOpener(open)); !errors.As(err, &pe) || pe.Record != 2 {
		t.Errorf("Build with shuffle: error %v, want record 2", err)
	}
}

// shareGPTGenerator produces a ShareGPT array of n conversations on the fly.
type shareGPTGenerator struct {
	n, i int
	buf  []byte
}

func (g *shareGPTGenerator) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		switch {
		case g.i == 0:
			g.buf = []byte("[\n")
		case g.i <= g.n:
			sep := ",\n"
			if g.i == g.n {
				sep = "\n]\n"
			}
			g.buf = fmt.Appendf(nil, `{"id": "%d", "conversations": [{"from": "human", "value": "%s"}, {"from": "gpt", "value": "%s"}]}%s`,
				g.i, strings.Repeat("question ", 60), strings.Repeat("answer ", 90), sep)
		default:
			return 0, io.EOF
		}
		g.i++
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func TestShareGPTMemoryIndependentOfSize(t *testing.T) {
	heapAfter := func(n int) uint64 {
		rd := NewShareGPTReader(&shareGPTGenerator{n: n}, "generated.json")
		var peak uint64
		for i := 0; ; i++ {
			_, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if i%2000 == 0 {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
		return peak
	}
	small, large := heapAfter(1000), heapAfter(8000) // about 1 MB and 8 MB of JSON
	if large > small+4<<20 {
		t.Errorf("heap in use grew from %d to %d bytes with 8x the input", small, large)
	}
}
