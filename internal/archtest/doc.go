// Package archtest enforces the project's dependency table (imports_test.go): each package of the module may
// import only what its row allows, and the deterministic core (router, sim, gpumodel,
// workloads) never reads the wall clock or the global random source. It has tests only.
package archtest
