package workloads

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/fstest"
)

// TestEmptyTraceRejected checks that every file-backed loader fails, naming the file, when
// its file yields no request: a run of zero requests that exits cleanly hides a failed
// download.
func TestEmptyTraceRejected(t *testing.T) {
	tests := []struct {
		name string
		kind Kind
		data string
		mode string
		why  string
	}{
		{"mooncake-empty", KindMooncake, "", "", "no records"},
		{"mooncake-blank-lines", KindMooncake, "\n\n  \n", "", "no records"},
		{"azure-header-only", KindAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n", "", "no records"},
		{"vidur-header-only", KindAzure, "arrived_at,num_prefill_tokens,num_decode_tokens\n", "", "no records"},
		{"sharegpt-empty-array", KindShareGPT, "[]", "", "no records"},
		{"sharegpt-all-filtered", KindShareGPT, `[{"conversations": [{"from": "human", "value": "hi"}]}]`, "", "dropped all 1"},
		{"sharegpt-multi-turn-empty", KindShareGPT, "[ ]\n", string(ModeMultiTurn), "no records"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := "traces/" + tc.name + ".data"
			fsys := fstest.MapFS{path: {Data: []byte(tc.data)}}
			open := func(p string) (io.ReadCloser, error) { return fsys.Open(p) }
			cfg := Config{Workload: WorkloadConfig{Kind: tc.kind, Path: path, Mode: tc.mode}}
			if tc.kind != KindShareGPT {
				cfg.Arrival = ArrivalConfig{Process: ProcessTrace}
			}
			err := buildAndDrain(cfg, open)
			if !errors.Is(err, ErrNoRequests) {
				t.Fatalf("error %v, want ErrNoRequests", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != path {
				t.Errorf("error %v does not name the file %s", err, path)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("error %q: want the file %s and %q", err, path, tc.why)
			}
		})
	}
}

// TestOneRecordTraceAccepted is the boundary: a single record is a valid trace.
func TestOneRecordTraceAccepted(t *testing.T) {
	fsys := fstest.MapFS{"one.jsonl": {Data: []byte(`{"timestamp": 0, "input_length": 5, "output_length": 2}` + "\n")}}
	open := func(p string) (io.ReadCloser, error) { return fsys.Open(p) }
	cfg := Config{Workload: WorkloadConfig{Kind: KindMooncake, Path: "one.jsonl"}, Arrival: ArrivalConfig{Process: ProcessTrace}}
	if err := buildAndDrain(cfg, open); err != nil {
		t.Fatalf("one-record trace: %v", err)
	}
}

// buildAndDrain builds cfg (defaults filled in) and takes every request, answering each at
// once; it returns the first error from Build or the stream.
func buildAndDrain(cfg Config, open func(string) (io.ReadCloser, error)) error {
	s, err := Build(cfg.Resolve(), 1, WithOpener(open), WithText(false))
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		req, ok := s.Next()
		if !ok {
			break
		}
		if err := s.Done(req.ID, Completion{At: req.Arrival}); err != nil {
			return err
		}
	}
	return s.Err()
}
