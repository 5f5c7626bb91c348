package workloads

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMooncakeBlocks(t *testing.T) {
	cfg := Config{Workload: WorkloadConfig{Kind: KindMooncake, Path: "testdata/mooncake_small.jsonl"}}
	reqs := drive(t, mustBuild(t, cfg, 5), fixedService(time.Second), nil)
	if len(reqs) != 7 {
		t.Fatalf("%d requests, want 7", len(reqs))
	}
	block := func(r Request, i int) []int32 { return r.Tokens[i*512 : min((i+1)*512, len(r.Tokens))] }
	// Records 0, 1, 3 and 6 start with hash ids [0, 1]; 0 and 3 share [0, 1, 2].
	for _, i := range []int{1, 3, 6} {
		if !slices.Equal(reqs[0].Tokens[:1024], reqs[i].Tokens[:1024]) {
			t.Errorf("request %d does not share blocks 0 and 1 with request 0", i)
		}
		if !strings.HasPrefix(reqs[i].Text, Words(reqs[0].Tokens[:1024])) {
			t.Errorf("request %d does not share the text of blocks 0 and 1", i)
		}
	}
	// Record 0 holds 76 tokens of block 2, record 3 all 512: a partial block is a prefix.
	if b0, b3 := block(reqs[0], 2), block(reqs[3], 2); len(b0) != 76 || !slices.Equal(b0, b3[:76]) {
		t.Errorf("partial block 2 (%d tokens) is not a prefix of the full one", len(b0))
	}
	if slices.Equal(block(reqs[1], 2)[:100], block(reqs[3], 2)[:100]) {
		t.Error("hash ids 3 and 2 gave the same block")
	}
	// Record 4 (one id, 900 tokens) is padded; record 2 asks for 0 output tokens.
	if len(reqs[4].Tokens) != 900 || reqs[2].OutputTokens != 1 {
		t.Errorf("padding or zero output wrong: %d tokens, output %d", len(reqs[4].Tokens), reqs[2].OutputTokens)
	}
	wantAt := []time.Duration{0, 0, 250 * time.Millisecond, time.Second, 1000500 * time.Microsecond, 2500 * time.Millisecond, 4 * time.Second}
	var got []time.Duration
	for _, r := range reqs {
		got = append(got, r.Arrival)
	}
	if diff := cmp.Diff(wantAt, got); diff != "" {
		t.Errorf("arrivals (-want +got):\n%s", diff)
	}
}

func TestTraceErrors(t *testing.T) {
	tests := []struct {
		name, format, data string
		line               int
		field, msg         string
	}{
		{name: "mooncake-missing", format: "mooncake", data: `{"timestamp": 0, "input_length": 5, "output_length": 2}` + "\n" + `{"timestamp": 1, "output_length": 2}`,
			line: 2, field: "input_length", msg: "missing"},
		{name: "mooncake-type", format: "mooncake", data: `{"timestamp": 0, "input_length": "5", "output_length": 2}`, line: 1, field: "input_length", msg: "want int"},
		{name: "mooncake-negative", format: "mooncake", data: "\n\n" + `{"timestamp": 0, "input_length": 5, "output_length": -2}`, line: 3, field: "output_length"},
		{name: "mooncake-hash", format: "mooncake", data: `{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [1.5]}`, line: 1, field: "hash_ids"},
		{name: "mooncake-order", format: "mooncake", data: `{"timestamp": 10, "input_length": 5, "output_length": 2}` + "\n" + `{"timestamp": 9, "input_length": 5, "output_length": 2}`,
			line: 2, field: "timestamp", msg: "backwards"},
		{name: "mooncake-syntax", format: "mooncake", data: `{"timestamp": 0,`, line: 1, msg: "malformed"},
		{name: "mooncake-huge-time", format: "mooncake", data: `{"timestamp": 1e300, "input_length": 5, "output_length": 2}`, line: 1, field: "timestamp"},
		{name: "mooncake-long-line", format: "mooncake", data: strings.Repeat(" ", maxLineBytes+1), line: 1, msg: "too long"},
		{name: "azure-header", format: "azure", data: "time,in,out\n1,2,3\n", line: 1, msg: "header"},
		{name: "azure-empty", format: "azure", data: "", line: 1, msg: "empty"},
		{name: "azure-time", format: "azure", data: "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", line: 2, field: "TIMESTAMP"},
		{name: "azure-tokens", format: "azure", data: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n2023-11-16 18:15:47.68,x,2\n",
			line: 3, field: "ContextTokens"},
		{name: "azure-short-row", format: "azure", data: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1\n", line: 2, field: "GeneratedTokens"},
		{name: "azure-quote", format: "azure", data: "TIMESTAMP,ContextTokens,GeneratedTokens\n\"2023,1,2\n", line: 2, msg: "quote"},
		{name: "azure-order", format: "azure", data: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1,2\n2023-11-16 18:15:45.68,1,2\n",
			line: 3, field: "TIMESTAMP", msg: "backwards"},
		{name: "vidur-seconds", format: "azure", data: "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,2\nsoon,1,2\n", line: 3, field: "TIMESTAMP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := readAll(tc.format, strings.NewReader(tc.data))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if pe.File != "bad" || pe.Line != tc.line || pe.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q: line %d field %q, want line %d field %q mentioning %q", err, pe.Line, pe.Field, tc.line, tc.field, tc.msg)
			}
		})
	}
}

// readAll reads a whole trace of the given format, returning the first error other than EOF.
func readAll(format string, r io.Reader) error {
	next := NewAzureReader(r, "bad").Next
	if format == "mooncake" {
		rd := NewMooncakeReader(r, "bad")
		next = func() (AzureRecord, error) { _, err := rd.Next(); return AzureRecord{}, err }
	}
	for {
		if _, err := next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func TestAzureFormats(t *testing.T) {
	for _, path := range []string{"testdata/azure_small.csv", "testdata/vidur_small.csv"} {
		f, err := openFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rd := NewAzureReader(f, path)
		first, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		second, err := rd.Next()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := AzureRecord{Arrival: 4314579 * time.Microsecond, ContextTokens: 396, GeneratedTokens: 109}
		if first.Arrival != 0 || second != want {
			t.Errorf("%s: records %+v, %+v; want offset 0 then %+v", path, first, second, want)
		}
	}
}

func TestTraceTimeScale(t *testing.T) {
	for _, scale := range []float64{0.5, 1, 3} {
		cfg := Config{Workload: WorkloadConfig{Kind: KindAzure, Path: "testdata/azure_small.csv"}, Arrival: ArrivalConfig{TimeScale: scale}}
		reqs := drive(t, mustBuild(t, cfg, 1, WithText(false)), fixedService(time.Second), nil)
		last := reqs[len(reqs)-1].Arrival
		if want := time.Duration(14.31941 * scale * float64(time.Second)); (last - want).Abs() > time.Microsecond {
			t.Errorf("time_scale %g: last arrival %v, want %v", scale, last, want)
		}
	}
}

// mooncakeGenerator produces n JSONL trace lines on the fly.
type mooncakeGenerator struct {
	n, i int
	buf  []byte
}

func (g *mooncakeGenerator) Read(p []byte) (int, error) {
	if len(g.buf) == 0 {
		if g.i == g.n {
			return 0, io.EOF
		}
		g.buf = fmt.Appendf(nil, `{"timestamp": %d, "input_length": 4000, "output_length": 10, "hash_ids": [%d, 1, 2, 3, 4, 5, 6, 7]}`+"\n", g.i, g.i)
		g.i++
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func TestMooncakeMemoryIndependentOfSize(t *testing.T) {
	peak := func(n int) uint64 {
		rd := NewMooncakeReader(&mooncakeGenerator{n: n}, "generated.jsonl")
		var top uint64
		for i := 0; ; i++ {
			if _, err := rd.Next(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if i%2500 == 0 {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				top = max(top, ms.HeapInuse)
			}
		}
		return top
	}
	if small, large := peak(2500), peak(20000); large > small+2<<20 {
		t.Errorf("heap in use grew from %d to %d bytes with 8x the lines", small, large)
	}
}
