package strictyaml_test

import (
	"fmt"

	"kvroute/internal/strictyaml"
)

func ExampleDecode() {
	var c struct {
		Fleet struct {
			GPU      string `yaml:"gpu"`
			Replicas int    `yaml:"replicas"`
		} `yaml:"fleet"`
	}
	err := strictyaml.Decode([]byte("# a fleet\nfleet:\n  gpu: H100\n  replica: 4\n"), &c)
	fmt.Println(err)
	// Output:
	// line 4 (field fleet.replica): field replica not found in type struct { GPU string "yaml:\"gpu\""; Replicas int "yaml:\"replicas\"" }
}
