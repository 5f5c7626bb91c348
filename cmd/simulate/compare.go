package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"kvroute/results"
	"kvroute/results/report"
)

// isMode reports whether args ask for mode (compare, calibrate): a -mode flag anywhere, or
// the mode as the subcommand first.
func isMode(args []string, mode string) bool {
	if len(args) > 0 && args[0] == mode {
		return true
	}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == mode {
			return true
		}
	}
	return false
}

// runCompare overlays a simulated and a live results directory of the same workload:
//
//	simulate -compare SIMDIR,LIVEDIR [-out DIR]
//	simulate compare [-out DIR] SIMDIR LIVEDIR
//
// It prints the per-metric errors and the verdict, and writes compare.md with TTFT plots
// of both sides to -out (default out/compare). Exit status 0 when every pair is within
// tolerance, 1 when one is not, 2 for bad arguments or unreadable directories.
// compareFlags defines the comparison's flags: -compare's value and -out's.
func compareFlags(stderr io.Writer) (fs *flag.FlagSet, pair, out *string) {
	fs = flag.NewFlagSet("simulate compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pair = fs.String("compare", "", "SIMDIR,LIVEDIR: a simulated and a live results directory (or give them as two arguments)")
	out = fs.String("out", filepath.Join("out", "compare"), "directory for compare.md and its plots")
	return fs, pair, out
}

func runCompare(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compare" {
		args = args[1:]
	}
	fs, pair, out := compareFlags(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	simDir, liveDir, err := compareDirs(*pair, fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "simulate compare:", err)
		fs.Usage()
		return 2
	}
	sim, err := results.ReadSummary(simDir)
	if err != nil {
		fmt.Fprintln(stderr, "simulate compare:", err)
		return 2
	}
	live, err := results.ReadSummary(liveDir)
	if err != nil {
		fmt.Fprintln(stderr, "simulate compare:", err)
		return 2
	}
	c, err := report.Compare(sim, live, report.DefaultCompareConfig())
	if err != nil {
		fmt.Fprintln(stderr, "simulate compare:", err)
		return 1
	}
	if err := c.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "simulate compare:", err)
	}
	if err := c.WriteDir(*out, simDir, liveDir); err != nil {
		fmt.Fprintln(stderr, "simulate compare:", err)
		return 1
	}
	if len(c.UnmatchedSim)+len(c.UnmatchedLive) > 0 {
		fmt.Fprintf(stderr, "simulate compare: unmatched runs: simulated %v, live %v\n", c.UnmatchedSim, c.UnmatchedLive)
	}
	fmt.Fprintf(stderr, "simulate compare: %d pairs, report in %s\n", len(c.Pairs), filepath.Join(*out, report.CompareFile))
	for i := range c.Pairs {
		if !c.Pairs[i].Within() {
			return 1
		}
	}
	return 0
}

// compareDirs takes the two directories from -compare or from the arguments.
func compareDirs(flagValue string, rest []string) (string, string, error) {
	switch {
	case flagValue != "" && len(rest) == 0:
		sim, live, ok := strings.Cut(flagValue, ",")
		if !ok || sim == "" || live == "" || strings.Contains(live, ",") {
			return "", "", fmt.Errorf("-compare %q: want SIMDIR,LIVEDIR", flagValue)
		}
		return sim, live, nil
	case flagValue == "" && len(rest) == 2:
		return rest[0], rest[1], nil
	}
	return "", "", errors.New("want -compare SIMDIR,LIVEDIR or two directories")
}
