package workloads

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// addFixture seeds a fuzz corpus with a testdata file.
func addFixture(f *testing.F, path string) {
	f.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
}

// checkParseError fails unless err is io.EOF or a *ParseError labelled with name.
func checkParseError(t *testing.T, err error, name string) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != name || pe.Err == nil || !strings.HasPrefix(err.Error(), "workloads: "+name) {
		t.Fatalf("error %v (%T) is not a *ParseError naming %s", err, err, name)
	}
}

func FuzzShareGPT(f *testing.F) {
	addFixture(f, shareGPTFixture)
	for _, s := range []string{"", "[]", "[{}]", `[{"conversations": null}]`, `[{"id": 1}]`, "[1, 2", `[{"conversations": [{"from": "human"}]}] x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got []ShareGPTConversation
		rd := NewShareGPTReader(bytes.NewReader(data), "fuzz.json")
		for {
			c, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				checkParseError(t, err, "fuzz.json")
				return
			}
			got = append(got, c)
		}
		// Round trip: what was read, written back, reads the same. The offsets read back too.
		enc, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		back := NewShareGPTReader(bytes.NewReader(enc), "back.json")
		for i := range got {
			c, err := back.Next()
			if err != nil {
				t.Fatalf("re-reading record %d: %v", i+1, err)
			}
			at, err := readShareGPTAt(bytes.NewReader(enc), int64(len(enc)), back.Offset(), "back.json", i+1)
			if err != nil || !cmp.Equal(c, got[i], cmpEmpty) || !cmp.Equal(at, got[i], cmpEmpty) {
				t.Fatalf("record %d round trip: %+v / %+v (err %v), want %+v", i+1, c, at, err, got[i])
			}
		}
	})
}

// cmpEmpty treats nil and empty slices as equal.
var cmpEmpty = cmp.Comparer(func(a, b []ShareGPTMessage) bool {
	return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b))
})

func FuzzMooncake(f *testing.F) {
	addFixture(f, "testdata/mooncake_small.jsonl")
	for _, s := range []string{"", "\n\n", "{}", `{"timestamp": -1}`, `{"timestamp": 1, "input_length": 9e99, "output_length": 1}`, "[1]\n", "nul"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got []MooncakeRecord
		rd := NewMooncakeReader(bytes.NewReader(data), "fuzz.jsonl")
		for {
			rec, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				checkParseError(t, err, "fuzz.jsonl")
				return
			}
			if rec.InputLength < 0 || rec.OutputLength < 0 || rec.Timestamp < 0 {
				t.Fatalf("accepted a negative field: %+v", rec)
			}
			got = append(got, rec)
		}
		var buf bytes.Buffer
		for _, r := range got {
			line, _ := json.Marshal(map[string]any{"timestamp": float64(r.Timestamp) / 1e6,
				"input_length": r.InputLength, "output_length": r.OutputLength, "hash_ids": r.HashIDs})
			buf.Write(append(line, '\n'))
		}
		rd = NewMooncakeReader(&buf, "back.jsonl")
		for i := range got {
			rec, err := rd.Next()
			if err != nil || !cmp.Equal(rec, got[i], cmpEmptyIDs) {
				t.Fatalf("record %d round trip: %+v (err %v), want %+v", i+1, rec, err, got[i])
			}
		}
	})
}

var cmpEmptyIDs = cmp.Comparer(func(a, b []int64) bool { return slices.Equal(a, b) })

func FuzzAzure(f *testing.F) {
	addFixture(f, "testdata/azure_small.csv")
	addFixture(f, "testdata/vidur_small.csv")
	for _, s := range []string{"", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "a,b\n\"", "arrived_at,num_prefill_tokens,num_decode_tokens\n1e308,1,1\n-1e308,1,1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := NewAzureReader(bytes.NewReader(data), "fuzz.csv")
		for {
			rec, err := rd.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				checkParseError(t, err, "fuzz.csv")
				return
			}
			if rec.ContextTokens < 0 || rec.GeneratedTokens < 0 || rec.Arrival < 0 {
				t.Fatalf("accepted a negative field: %+v", rec)
			}
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	for _, tc := range goldenCases {
		f.Add([]byte(tc.yaml))
	}
	for _, s := range []string{"", "requests: -1", "workload: {kind: mix, tenants: [{name: a, workload: {kind: mix}}]}",
		"arrival: {rate: .nan}", "duration: 1e999h", "workload: &a {tenants: [*a]}",
		"workload: {repeat: true, cycle: true}\narrival: {stages: [{rate: 3, duration: 2s, warmup: true}, {rate: 0.5, duration: 1s}]}",
		"arrival: {process: gamma, drain: false, stages: [{rate: 1e6, duration: 1ns}]}",
		"arrival: {stage_interval: -1s, stages: [{rate: 2, duration: 24h}]}",
		"workload: {groups: 2, prompts_per_group: 2, concurrency: 3}\narrival: {process: immediate}",
		"workload: {repeat: true, concurrency: 2}\nrequests: 5"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "workloads: config fuzz.yaml") {
				t.Fatalf("error %q lacks the package and file prefix", err)
			}
			return
		}
		if c.Validate() != nil {
			return
		}
		r := c.Resolve()
		if err := r.Validate(); err != nil {
			t.Fatalf("resolving a valid config made it invalid: %v", err)
		}
		out, err := yaml.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig("back.yaml", out)
		if err != nil || !cmp.Equal(back, r) {
			t.Fatalf("round trip: %+v (err %v), want %+v", back, err, r)
		}
		buildSome(t, c)
	})
}

// buildSome builds a valid config against in-memory fixtures and takes a few requests.
func buildSome(t *testing.T, c Config) {
	t.Helper()
	open := func(string) (io.ReadCloser, error) { return nil, fmt.Errorf("no files while fuzzing") }
	s, err := Build(c, 1, WithOpener(open), WithText(false))
	if err != nil {
		if !strings.Contains(err.Error(), "no files while fuzzing") {
			t.Fatalf("Build of a valid config: %v", err)
		}
		return
	}
	defer s.Close()
	for range 3 {
		req, ok := s.Next()
		if !ok {
			break
		}
		if len(req.Tokens) > 4*maxSegmentTokens {
			break // a legal but large config: enough
		}
		if err := s.Done(req.ID, Completion{At: req.Arrival}); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzWords(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 255, 255, 255, 127})
	f.Fuzz(func(t *testing.T, data []byte) {
		ids := make([]int32, 0, len(data)/2)
		for i := 0; i+1 < len(data); i += 2 {
			ids = append(ids, int32(uint16(data[i])|uint16(data[i+1])<<8)%VocabSize)
		}
		back, err := ParseWords(Words(ids))
		if err != nil || (len(ids) > 0 && !slices.Equal(back, ids)) {
			t.Fatalf("ParseWords(Words(%v)) = %v, %v", ids, back, err)
		}
		if _, err := ParseWords(string(data)); err != nil && !strings.HasPrefix(err.Error(), "workloads: ") {
			t.Fatalf("error %q lacks the package prefix", err)
		}
	})
}
