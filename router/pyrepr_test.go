package router

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPyPayloadMatchesCPython checks appendPyPayload against str((json.loads(body),)) as
// CPython 3 printed it (testdata/pyrepr/gen.py wrote the .txt files): quotes, escapes,
// unprintable and non-BMP characters, ints of any size, float repr, duplicate keys.
func TestPyPayloadMatchesCPython(t *testing.T) {
	files, err := filepath.Glob("testdata/pyrepr/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendPyPayload(nil, body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", f, got, want)
		}
	}
}

func TestPyPayloadRejectsMalformedJSON(t *testing.T) {
	for _, body := range []string{``, `{`, `{"a":}`, `{"a":1} {}`, `[1,]`} {
		if got, err := appendPyPayload(nil, []byte(body)); err == nil {
			t.Errorf("%q: got %q, want an error", body, got)
		}
	}
}

func FuzzPyPayload(f *testing.F) {
	for _, s := range []string{`{"model":"m","prompt":"x"}`, `{"a":[1,2.5e-7,{"b":null}]}`, `"s"`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a, errA := appendPyPayload(nil, body)
		b, errB := appendPyPayload(nil, body)
		if (errA == nil) != (errB == nil) || string(a) != string(b) {
			t.Fatalf("not deterministic: %q %v / %q %v", a, errA, b, errB)
		}
	})
}

// TestPyPayloadRefusesDeepNesting: CPython's json.loads raises RecursionError near its
// recursion limit of 1,000, so a body nested deeper never reaches Neutree; the renderer refuses
// it rather than recursing as deep as a hostile body asks.
func TestPyPayloadRefusesDeepNesting(t *testing.T) {
	nested := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	if _, err := appendPyPayload(nil, nested(maxPyDepth)); err != nil {
		t.Fatalf("depth %d: %v", maxPyDepth, err)
	}
	if got, err := appendPyPayload(nil, nested(100000)); err == nil {
		t.Fatalf("depth 100,000: rendered %d bytes, want an error", len(got))
	}
}
