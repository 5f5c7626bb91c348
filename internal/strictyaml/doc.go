// Package strictyaml is the one strict YAML decoder of kvroute's configuration files (sweep
// files, workload configs, cmd/route's config): a key the target has no field for is an
// error, a file holds one document, and every error names the line of the file it comes
// from and the dotted path of the field ("line 8 (field fleet.bogus): ..."), also when the
// document was rewritten as a node tree before decoding (sweep axes, deprecated spellings).
package strictyaml
