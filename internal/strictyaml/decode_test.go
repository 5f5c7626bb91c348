package strictyaml

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

type fleet struct {
	GPU      string `yaml:"gpu"`
	Replicas int    `yaml:"replicas"`
}

type config struct {
	Fleet    fleet         `yaml:"fleet"`
	Interval time.Duration `yaml:"interval"`
	Tenants  []struct {
		Name   string  `yaml:"name"`
		Weight float64 `yaml:"weight"`
	} `yaml:"tenants"`
}

func TestDecodeErrorsNameLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []FieldError // empty: no error
	}{
		{"valid", "fleet: {gpu: H100, replicas: 4}\ninterval: 50ms\n", nil},
		{"empty", "# nothing\n", nil},
		{"unknown nested key", "# c\n\nfleet:\n  gpu: H100\n\n  bogus: 3\n", []FieldError{{6, "fleet.bogus", "field bogus not found in type strictyaml.fleet"}}},
		{"unknown key in a flow mapping", "interval: 1s\nfleet: {gpu: H100, extra: 1}\n", []FieldError{{2, "fleet.extra", "field extra not found in type strictyaml.fleet"}}},
		{"bad value", "fleet:\n  replicas: four\n", []FieldError{{2, "fleet.replicas", "cannot unmarshal !!str `four` into int"}}},
		{"in a sequence", "tenants:\n  - name: a\n    weight: x\n  - name: b\n    colour: red\n", []FieldError{
			{3, "tenants[0].weight", "cannot unmarshal !!str `x` into float64"},
			{5, "tenants[1].colour", "field colour not found in type struct { Name string \"yaml:\\\"name\\\"\"; Weight float64 \"yaml:\\\"weight\\\"\" }"}}},
		{"two problems", "fleet: {gpu: 1, colour: red}\nsize: 2\n", []FieldError{
			{1, "fleet.colour", "field colour not found in type strictyaml.fleet"}, {2, "size", "field size not found in type strictyaml.config"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			err := Decode([]byte(tc.yaml), &c)
			if got := fieldErrors(t, err); !cmp.Equal(tc.want, got) {
				t.Errorf("errors (-want +got):\n%s", cmp.Diff(tc.want, got))
			}
		})
	}
}

// fieldErrors unpacks Decode's joined *FieldErrors, failing on any other kind of error.
func fieldErrors(t *testing.T, err error) []FieldError {
	t.Helper()
	if err == nil {
		return nil
	}
	var out []FieldError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a *FieldError", e)
		}
		out = append(out, *fe)
	}
	return out
}

func TestDecodeRejectsTwoDocumentsAndBadSyntax(t *testing.T) {
	var c config
	for _, tc := range []struct{ yaml, want string }{
		{"fleet: {gpu: H100}\n---\nfleet: {gpu: A100}\n", "line 2: a second document"},
		{"fleet: [1, 2\n", "yaml: line 1"},
	} {
		if err := Decode([]byte(tc.yaml), &c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}

// TestDecodeNodeKeepsTheFilesLines rewrites a parsed file as sweep expansion does (a list
// replaced by one of its values) and checks that an error later in the file still names the
// file's line, although the encoded document is shorter.
func TestDecodeNodeKeepsTheFilesLines(t *testing.T) {
	src := "fleet:\n  replicas:\n    - 2\n    - 4\n    - 8\n  gpu: H100\n\n\n  typo: 1\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	f := doc.Content[0].Content[1]
	f.Content[1] = f.Content[1].Content[1] // replicas: 4
	var c config
	got := fieldErrors(t, DecodeNode(&doc, &c))
	want := []FieldError{{9, "fleet.typo", "field typo not found in type strictyaml.fleet"}}
	if !cmp.Equal(want, got) {
		t.Errorf("errors (-want +got):\n%s", cmp.Diff(want, got))
	}
	if c.Fleet.Replicas != 4 {
		t.Errorf("replicas = %d, want 4, the value the rewrite chose", c.Fleet.Replicas)
	}
}

func TestFields(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("fleet:\n  gpu: H100\ntenants:\n  - name: a\n  - {name: b}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"fleet": 1, "fleet.gpu": 2, "tenants": 3, "tenants[0]": 4, "tenants[0].name": 4, "tenants[1]": 5, "tenants[1].name": 5}
	if got := Fields(&doc); !cmp.Equal(want, got) {
		t.Errorf("Fields (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// FuzzDecode holds Decode to its contract on any input: it does not panic; every field error
// points at a line of the input (or just past its end, where the YAML parser puts an implicit
// null that ends it); and what it accepts survives a round trip (encode, decode
// again) unchanged.
func FuzzDecode(f *testing.F) {
	f.Add("fleet: {gpu: H100, replicas: 4}\ninterval: 50ms\ntenants: [{name: a, weight: 1}]\n")
	f.Add("fleet:\n  bogus: 1\n")
	f.Add("tenants:\n  - name: &x a\n  - name: *x\n")
	f.Add("a: b\n---\nc: d\n")
	f.Fuzz(func(t *testing.T, src string) {
		var c config
		err := Decode([]byte(src), &c)
		lines := 1 // an upper bound on the lines YAML sees: \r\n counts twice here, once there
		for _, br := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
			lines += strings.Count(src, br)
		}
		var fe *FieldError
		for _, e := range unwrapAll(err) {
			if errors.As(e, &fe) && (fe.Line < 1 || fe.Line > lines+1) {
				t.Fatalf("error at line %d of a %d-line input: %v", fe.Line, lines, e)
			}
		}
		if err != nil {
			return
		}
		data, err := yaml.Marshal(&c)
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		var back config
		if err := Decode(data, &back); err != nil {
			t.Fatalf("decoding its own encoding %q: %v", data, err)
		}
		if opts := []cmp.Option{cmpopts.EquateEmpty(), cmpopts.EquateNaNs()}; !cmp.Equal(c, back, opts...) {
			t.Fatalf("round trip (-first +second):\n%s", cmp.Diff(c, back, opts...))
		}
	})
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
