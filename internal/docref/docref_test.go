package docref

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// inner is a nested section.
type inner struct {
	// Rate is per second.
	Rate float64 `yaml:"rate"`
	// Self holds a copy of the outer section.
	Self []outer `yaml:"self,omitempty"`
}

// base is inlined.
type base struct {
	// GPU is a name.
	GPU string `yaml:"gpu"`
}

// outer is the walked configuration.
type outer struct {
	// Name names it.
	Name string `yaml:"name"`
	base `yaml:",inline"`
	// Wait is a duration.
	Wait time.Duration `yaml:"wait"`
	// In is nested.
	In inner `yaml:"in"`
	// ByName is a map of sections.
	ByName map[string]inner `yaml:"by_name"`
	Bare   int              `yaml:"bare"`
	//lint:ignore U1000 an unexported field, which Keys must leave out
	hidden int
	// Skip is not a key.
	Skip int `yaml:"-"`
}

func TestKeys(t *testing.T) {
	src, err := NewSources(".")
	if err != nil {
		t.Fatal(err)
	}
	src.mainDir = "." // this package's types stand in for a command's
	got, err := Keys(outer{Name: "x", Wait: 2 * time.Second, In: inner{Rate: 1.5}}, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{"name", "string", "x", "Name names it."},
		{"gpu", "string", "", "GPU is a name."},
		{"wait", "duration", "2s", "Wait is a duration."},
		{"in", "object", "", "In is nested."},
		{"in.rate", "float", "1.5", "Rate is per second."},
		{"in.self", "list of object (the keys of the top level)", "", "Self holds a copy of the outer section."},
		{"by_name", "map of object", "", "ByName is a map of sections."},
		{"by_name.<name>.rate", "float", "", "Rate is per second."},
		{"by_name.<name>.self", "list of object (the keys of the top level)", "", "Self holds a copy of the outer section."},
		{"bare", "int", "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
	if got := Undocumented(Table{Title: "t", Rows: got}); !cmp.Equal(got, []string{"t: bare"}) {
		t.Errorf("Undocumented = %q, want [t: bare]", got)
	}
}

// Duration stands for a named duration type such as router.Duration.
type Duration int64

// params is a configuration decoded by its json tags, as policy parameters are.
type params struct {
	// Window is how far back to look.
	Window Duration `json:"window"`
	// Weight is a share, in [0, 1].
	Weight float64 `json:"weight,omitempty"`
	// Yaml is not read: only the json tag names keys here.
	Other int `yaml:"other" json:"json_other"`
	// Lo and Hi bound it: one comment for a run of fields.
	Lo int `json:"lo"`
	Hi int `json:"hi"`
	// Next has its own comment.
	Next int `json:"next"`
	Bare int `json:"bare"`
}

func TestKeysByTagJSON(t *testing.T) {
	src, err := NewSources(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := KeysByTag(params{Window: Duration(30 * time.Second), Weight: 0.5}, src, "json")
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{"window", "duration", "30s", "Window is how far back to look."},
		{"weight", "float", "0.5", "Weight is a share, in [0, 1]."},
		{"json_other", "int", "", "Yaml is not read: only the json tag names keys here."},
		{"lo", "int", "", "Lo and Hi bound it: one comment for a run of fields."},
		{"hi", "int", "", "Lo and Hi bound it: one comment for a run of fields."},
		{"next", "int", "", "Next has its own comment."},
		{"bare", "int", "", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KeysByTag (-want +got):\n%s", diff)
	}
}

func TestRenderEmptyTable(t *testing.T) {
	page := string(Render("t", "regen", Table{Title: "none", Intro: "No keys."}, Table{Title: "one", Rows: []Row{{Key: "k", Doc: "d"}}}))
	if strings.Count(page, "| key |") != 1 || !strings.Contains(page, "## none\n\nNo keys.\n\n## one") {
		t.Errorf("Render with an empty table:\n%s", page)
	}
}

func ExampleFlags() {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.Duration("interval", 50*time.Millisecond, "time between scrapes")
	fs.String("target", "", "base `URL` of the endpoint")
	fs.Bool("quiet", false, "no progress output")
	page := Render("demo reference", "go test ./demo -run TestReference -update", Table{Title: "Flags", Rows: Flags(fs)})
	fmt.Println(strings.SplitN(string(page), "## ", 2)[1])
	// Output:
	// Flags
	//
	// | key | type | default | description |
	// |---|---|---|---|
	// | `-interval` | duration | `50ms` | time between scrapes |
	// | `-quiet` | bool |  | no progress output |
	// | `-target` | URL |  | base URL of the endpoint |
}
