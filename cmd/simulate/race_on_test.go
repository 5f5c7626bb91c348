//go:build race

package main

// raceEnabled reports whether the test binary was built with -race, which makes the
// simulator several times slower.
const raceEnabled = true
