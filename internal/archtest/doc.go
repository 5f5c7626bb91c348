// Package archtest enforces the project's dependency table (imports_test.go): each package of the module may
// import only what its row allows, and the deterministic core (router, sim, gpumodel,
// workloads) never reads the wall clock or the global random source. Test helpers are the
// packages named *test (routertest, resultstest, nettest, benchtest): only they import
// testing outside _test.go files, and only tests and other helpers import them
// (testonly_test.go). It has tests only.
package archtest
