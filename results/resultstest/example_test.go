package resultstest_test

import (
	"fmt"

	"kvroute/results/resultstest"
)

func ExampleRuns() {
	runs, recs := resultstest.Runs()
	fmt.Println(len(runs), runs[0].Name, len(recs[runs[0].Name]))
	// Output: 5 chat/prefix-hash/r4 120
}
