// Package docref generates the configuration reference in docs/reference: the keys of a
// YAML configuration struct, walked by reflection (yaml tags, inline and nested structs,
// lists and maps of structs) and described by the Go doc comments of their fields, and the
// flags of a command's flag.FlagSet, described by their usage strings. The doc lives in
// one place, the code; each command's reference_test.go renders its page, fails when the
// committed page differs (go test -update rewrites it) and when a key has no description.
package docref
