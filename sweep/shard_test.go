package sweep

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Shard
		wantErr string // a substring of the error; empty: no error
	}{
		{in: "0/1", want: Shard{0, 1}},
		{in: "2/3", want: Shard{2, 3}},
		{in: " 7/10 ", want: Shard{7, 10}},
		{in: "3/3", wantErr: "index"},
		{in: "-1/3", wantErr: "index"},
		{in: "0/0", wantErr: "count"},
		{in: "1/100001", wantErr: "count"},
		{in: "1", wantErr: "want i/n"},
		{in: "a/2", wantErr: "index"},
		{in: "1/b", wantErr: "count"},
		{in: "", wantErr: "want i/n"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseShard(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestShardsPartitionThePlan checks that the n shards of a list hold every position exactly
// once, in ascending order, and are within one item of each other in size.
func TestShardsPartitionThePlan(t *testing.T) {
	for _, total := range []int{0, 1, 5, 12, 13} {
		for _, n := range []int{1, 2, 3, 7, 20} {
			t.Run(fmt.Sprintf("total=%d/n=%d", total, n), func(t *testing.T) {
				items := make([]int, total)
				for i := range items {
					items[i] = i
				}
				var all []int
				minLen, maxLen := total, 0
				for i := range n {
					part := Select(Shard{Index: i, Count: n}, items)
					if !slices.IsSorted(part) {
						t.Fatalf("shard %d/%d out of order: %v", i, n, part)
					}
					if diff := cmp.Diff(Shard{Index: i, Count: n}.Positions(total), part); diff != "" {
						t.Fatalf("Positions and Select disagree (-positions +select):\n%s", diff)
					}
					minLen, maxLen = min(minLen, len(part)), max(maxLen, len(part))
					all = append(all, part...)
				}
				slices.Sort(all)
				if diff := cmp.Diff(items, all); diff != "" && total > 0 {
					t.Fatalf("shards do not partition the list (-want +got):\n%s", diff)
				}
				if total > 0 && maxLen-minLen > 1 {
					t.Fatalf("shard sizes range %d..%d", minLen, maxLen)
				}
			})
		}
	}
}

func TestShardJobsKeepTheirIndex(t *testing.T) {
	plan := make([]Job, 10)
	for i := range plan {
		plan[i] = Job{Index: i, Name: fmt.Sprint("run", i)}
	}
	var got []int
	for _, j := range (Shard{Index: 1, Count: 4}).Jobs(plan) {
		got = append(got, j.Index)
	}
	if diff := cmp.Diff([]int{1, 5, 9}, got); diff != "" {
		t.Fatalf("jobs of shard 1/4 (-want +got):\n%s", diff)
	}
	if n := len((Shard{}).Jobs(plan)); n != len(plan) {
		t.Fatalf("the zero shard holds %d of %d jobs", n, len(plan))
	}
}

// FuzzParseShard checks that any input is read or refused without a panic, and that a shard
// read prints back to itself.
func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"0/1", "3/4", "4/4", "x", "1/", "/1", "-0/+2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			return
		}
		if err := sh.Validate(); err != nil {
			t.Fatalf("ParseShard(%q) = %v, which is invalid: %v", s, sh, err)
		}
		back, err := ParseShard(sh.String())
		if err != nil || back != sh {
			t.Fatalf("round trip of %q: %v, %v", s, back, err)
		}
	})
}

func ExampleShard() {
	sh, err := ParseShard("1/3")
	if err != nil {
		panic(err)
	}
	fmt.Println(sh.Positions(8), Select(sh, []string{"a", "b", "c", "d", "e", "f", "g", "h"}))
	// Output: [1 4 7] [b e h]
}
