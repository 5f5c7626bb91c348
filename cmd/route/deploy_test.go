package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployConfigMapIsValid keeps the router configurations shipped in deploy/kubernetes
// decodable and valid.
func TestDeployConfigMapIsValid(t *testing.T) {
	for _, f := range []string{"router.yaml", "router-precise.yaml"} {
		t.Run(f, func(t *testing.T) { checkDeployFile(t, f) })
	}
}

func checkDeployFile(t *testing.T, name string) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	found := false
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc.Kind != "ConfigMap" {
			continue
		}
		found = true
		cfg := defaultFileConfig()
		if err := decodeYAML([]byte(doc.Data["route.yaml"]), &cfg); err != nil {
			t.Fatalf("route.yaml in the ConfigMap: %v", err)
		}
		if len(cfg.deprecated) > 0 {
			t.Fatalf("route.yaml in the ConfigMap uses deprecated spellings: %q", cfg.deprecated)
		}
		if err := cfg.Server.Validate(); err != nil {
			t.Fatalf("route.yaml in the ConfigMap: %v", err)
		}
		if err := cfg.Gateway.Validate(); err != nil {
			t.Fatalf("route.yaml in the ConfigMap: %v", err)
		}
		if len(cfg.Gateway.Backends) != 4 {
			t.Fatalf("backends %v", cfg.Gateway.Backends)
		}
	}
	if !found {
		t.Fatal("no ConfigMap in deploy/kubernetes/router.yaml")
	}
}
