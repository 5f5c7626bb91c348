package main

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"kvroute/sweep"
)

// deployDocs decodes the YAML documents of a file in deploy/kubernetes strictly into the
// Kubernetes API types of their kind: an unknown or misspelt field fails.
func deployDocs(t *testing.T, name string) (jobs []batchv1.Job, claims []corev1.PersistentVolumeClaim, maps []corev1.ConfigMap) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		var v any
		switch meta.Kind {
		case "Job":
			jobs = append(jobs, batchv1.Job{})
			v = &jobs[len(jobs)-1]
		case "PersistentVolumeClaim":
			claims = append(claims, corev1.PersistentVolumeClaim{})
			v = &claims[len(claims)-1]
		case "ConfigMap":
			maps = append(maps, corev1.ConfigMap{})
			v = &maps[len(maps)-1]
		default:
			t.Fatalf("%s document %d: kind %q: add it to the test", name, i, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			t.Fatalf("%s document %d (%s): %v", name, i, meta.Kind, err)
		}
	}
	return jobs, claims, maps
}

// TestSweepJob checks the Kubernetes sweep: the Indexed Job runs shard i of N in pod i, N is
// its completions, its sweep file is valid, and the merge Job reads the directory the
// shards write to, on the same volume.
func TestSweepJob(t *testing.T) {
	jobs, claims, cms := deployDocs(t, "sweep-job.yaml")
	if len(jobs) != 1 || len(claims) != 1 || len(cms) != 1 {
		t.Fatalf("sweep-job.yaml: %d Jobs, %d PVCs, %d ConfigMaps; want one of each", len(jobs), len(claims), len(cms))
	}
	job, claim := jobs[0], claims[0]
	if job.Spec.CompletionMode == nil || *job.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatal("the sweep Job is not Indexed")
	}
	if !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Error("the results volume is not ReadWriteMany: shards on several nodes cannot share it")
	}
	n := int(*job.Spec.Completions)
	o := jobOptions(t, job, "3") // pod 3
	if want := (sweep.Shard{Index: 3, Count: n}); o.shard != want {
		t.Fatalf("pod 3 runs shard %v, want %v (completions %d)", o.shard, want, n)
	}
	if other := jobOptions(t, job, "4"); other.out == o.out {
		t.Fatalf("pods 3 and 4 write to one directory, %s", o.out)
	}
	if _, err := sweep.Parse([]byte(cms[0].Data["sweep.yaml"]), "sweep.yaml"); err != nil {
		t.Fatalf("the ConfigMap's sweep.yaml: %v", err)
	}
	checkMounts(t, job, claim.Name, "/results", o.out)
	if path.Join(o.config, "..") != mountOf(t, job, "sweep") {
		t.Errorf("-config %s is not on the ConfigMap's mount", o.config)
	}

	merges, _, _ := deployDocs(t, "sweep-merge-job.yaml")
	if len(merges) != 1 {
		t.Fatalf("sweep-merge-job.yaml: %d Jobs, want one", len(merges))
	}
	m := jobOptions(t, merges[0], "")
	if !m.merge || !slices.Equal(m.dirs, []string{path.Dir(o.out)}) {
		t.Fatalf("the merge Job merges %v (merge %v), want the shards' parent %s", m.dirs, m.merge, path.Dir(o.out))
	}
	checkMounts(t, merges[0], claim.Name, "/results", m.out)
}

// jobOptions parses the Job's simulate arguments as pod index would run them.
func jobOptions(t *testing.T, job batchv1.Job, index string) options {
	t.Helper()
	c := job.Spec.Template.Spec.Containers
	if len(c) != 1 || len(c[0].Args) == 0 || c[0].Args[0] != "simulate" {
		t.Fatalf("job %s: want one container running simulate", job.Name)
	}
	var args []string
	for _, a := range c[0].Args[1:] {
		args = append(args, strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", index))
	}
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("job %s: simulate %v: %v", job.Name, args, err)
	}
	return o
}

// checkMounts checks that the Job mounts the claim at mount and that dir lies below it.
func checkMounts(t *testing.T, job batchv1.Job, claim, mount, dir string) {
	t.Helper()
	spec := job.Spec.Template.Spec
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim
	})
	if i < 0 {
		t.Fatalf("job %s does not mount claim %s", job.Name, claim)
	}
	if got := mountOf(t, job, spec.Volumes[i].Name); got != mount {
		t.Fatalf("job %s mounts the results at %s, want %s", job.Name, got, mount)
	}
	if !strings.HasPrefix(dir, mount+"/") {
		t.Fatalf("job %s writes to %s, outside the volume at %s", job.Name, dir, mount)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("job %s: restartPolicy %q: a retried shard should start in a new pod", job.Name, spec.RestartPolicy)
	}
}

func mountOf(t *testing.T, job batchv1.Job, volume string) string {
	t.Helper()
	for _, m := range job.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	t.Fatalf("job %s: volume %s not mounted", job.Name, volume)
	return ""
}
