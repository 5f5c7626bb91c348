package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const shardSweep = "testdata/shard.yaml"

// simulate runs the command and fails the test unless it exits with want.
func simulate(t *testing.T, want int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if got := run(append(args, "-quiet", "-parallel", "2"), &stdout, &stderr); got != want {
		t.Fatalf("simulate %v: exit %d, want %d\nstderr:\n%s", args, got, want, stderr.String())
	}
	return stdout.String() + stderr.String()
}

// runShards runs the sweep file as n shards into dir/s0..s(n-1) and returns their paths.
func runShards(t *testing.T, dir, config string, n int) []string {
	t.Helper()
	var dirs []string
	for i := range n {
		d := filepath.Join(dir, fmt.Sprint("s", i))
		simulate(t, 0, "-config", config, "-shard", fmt.Sprintf("%d/%d", i, n), "-out", d)
		dirs = append(dirs, d)
	}
	return dirs
}

// readTree reads every file under dir, keyed by its path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestShardsMergeToTheUnshardedRun runs a sweep whole and as shards, merges the shards, and
// checks that the merged directory holds the same files, byte for byte.
func TestShardsMergeToTheUnshardedRun(t *testing.T) {
	tmp := t.TempDir()
	whole := filepath.Join(tmp, "whole")
	simulate(t, 0, "-config", shardSweep, "-out", whole)
	for _, n := range []int{3, 9} { // 9 shards of 8 runs: one has none; merged from their parent
		t.Run(fmt.Sprint("shards=", n), func(t *testing.T) {
			dir := filepath.Join(tmp, fmt.Sprint(n))
			shards := runShards(t, dir, shardSweep, n)
			merged := filepath.Join(tmp, fmt.Sprint("merged", n))
			if n > 3 {
				shards = []string{dir} // their parent directory stands for them
			}
			if out := simulate(t, 0, append([]string{"-merge", "-out", merged}, shards...)...); !strings.Contains(out, fmt.Sprintf("merged %d shards", n)) {
				t.Errorf("-merge says %q, want %d shards merged", out, n)
			}
			want, got := readTree(t, whole), readTree(t, merged)
			if diff := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); diff != "" {
				t.Fatalf("files (-whole +merged):\n%s", diff)
			}
			for name, w := range want {
				if !bytes.Equal(w, got[name]) {
					t.Errorf("%s differs between the whole run and the merged shards", name)
				}
			}
			if len(want["requests.csv"]) < 1000 {
				t.Fatalf("requests.csv has %d bytes: the sweep ran no requests", len(want["requests.csv"]))
			}
		})
	}
}

// TestMergeRefuses checks that shards that are not the n parts of one finished sweep are
// refused with an error that says why.
func TestMergeRefuses(t *testing.T) {
	tmp := t.TempDir()
	s := runShards(t, filepath.Join(tmp, "a"), shardSweep, 3)
	other := filepath.Join(tmp, "seed4.yaml")
	data, err := os.ReadFile(shardSweep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, bytes.Replace(data, []byte("seed: 3"), []byte("seed: 4"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	seed4 := runShards(t, filepath.Join(tmp, "b"), other, 3)
	two := runShards(t, filepath.Join(tmp, "c"), shardSweep, 2)
	incomplete := copyShard(t, s[1], filepath.Join(tmp, "incomplete"), func(m *shardManifest) { m.Runs = m.Runs[1:] })
	edited := copyShard(t, s[1], filepath.Join(tmp, "edited"), nil)
	if err := os.WriteFile(filepath.Join(edited, "config.yaml"), []byte("points: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dirs []string
		want string
	}{
		{"missing shard", []string{s[0], s[2]}, "1 of 3 shards missing: 1/3"},
		{"duplicated shard", []string{s[0], s[1], s[1], s[2]}, "shard 1/3 given twice"},
		{"other seed", []string{s[0], seed4[1], s[2]}, "different configurations or seeds"},
		{"other shard count", []string{s[0], two[1], s[2]}, "one sweep has one shard count"},
		{"unfinished shard", []string{s[0], incomplete, s[2]}, "did not finish 1 of its 3 runs"},
		{"config edited", []string{s[0], edited, s[2]}, "config.yaml has changed"},
		{"not a shard", []string{s[0], t.TempDir()}, "not the output of a -shard run"},
		{"parent of shards, and one again", []string{filepath.Join(tmp, "a"), s[2]}, "shard 2/3 given twice"},
		{"nothing", nil, "no shard directories"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := simulate(t, 1, append([]string{"-merge", "-out", filepath.Join(tmp, "out")}, tc.dirs...)...)
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output %q does not say %q", out, tc.want)
			}
		})
	}
	if out := simulate(t, 2, append([]string{"-merge"}, s...)...); !strings.Contains(out, "-out is required") {
		t.Fatalf("-merge without -out: %q", out)
	}
}

// copyShard copies a shard directory, editing its manifest with edit when not nil.
func copyShard(t *testing.T, from, to string, edit func(*shardManifest)) string {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		return to
	}
	path := filepath.Join(to, ShardFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m shardManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return to
}

func TestShardsWithin(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name      string
		costs     []time.Duration
		parallel  int
		wall      time.Duration
		want      int
		wantSlows time.Duration
	}{
		{"one shard suffices", []time.Duration{s, s, s, s}, 2, 2 * s, 1, 2 * s},
		{"cpu bound", []time.Duration{s, s, s, s, s, s, s, s}, 2, 2 * s, 2, 2 * s},
		{"one parallel", []time.Duration{s, s, s, s}, 1, 2 * s, 2, 2 * s},
		{"a long run sets the floor", []time.Duration{3 * s, s, s, s}, 4, 3 * s, 1, 3 * s},
		{"a run longer than the wall", []time.Duration{5 * s, s}, 4, 3 * s, 0, 0},
		{"round-robin dealing counts", []time.Duration{2 * s, 2 * s, s, s}, 1, 3 * s, 2, 3 * s},
		{"no runs", nil, 2, s, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, slowest := shardsWithin(tc.costs, tc.parallel, tc.wall)
			if got != tc.want || slowest != tc.wantSlows {
				t.Fatalf("shardsWithin = %d shards, slowest %v; want %d, %v", got, slowest, tc.want, tc.wantSlows)
			}
		})
	}
}

// TestPlan checks that -plan counts the runs, says where its estimate comes from and
// names a shard count, and that it runs no sweep.
func TestPlan(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	got := simulate(t, 0, "-config", shardSweep, "-plan", "-plan-wall", "1h", "-out", out)
	for _, want := range []string{"runs: 8 ", "probe on this machine", "shards: 1 finish within 1h0m0s"} {
		if !strings.Contains(got, want) {
			t.Errorf("-plan output does not say %q:\n%s", want, got)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("-plan wrote a results directory")
	}
	if got := simulate(t, 2, "-config", shardSweep, "-plan", "-plan-wall", "0s"); !strings.Contains(got, "must be positive") {
		t.Errorf("-plan-wall 0s: %q", got)
	}
}
