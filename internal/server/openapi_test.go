package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite api/openapi.json from the route table")

// TestOpenAPIDocument: the committed api/openapi.json is what the server
// serves, and it documents every route.
func TestOpenAPIDocument(t *testing.T) {
	c := startCluster(t, 1)
	status, served := do(t, c.Servers[0].URL(), "", "GET", "/v1/openapi.json", "")
	if status != 200 {
		t.Fatalf("GET /v1/openapi.json: %d", status)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(served), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Servers[0].Routes() {
		method, path, _ := strings.Cut(r, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("route %s is not in the OpenAPI document", r)
		}
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(served), "", "  "); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("..", "..", "api", "openapi.json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run: make openapi)", err)
	}
	if !bytes.Equal(want, pretty.Bytes()) {
		t.Fatalf("api/openapi.json is stale: run `make openapi` and commit it")
	}
}
