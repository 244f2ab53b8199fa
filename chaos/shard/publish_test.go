package shard

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackKeepsABenchmarksResults packs a benchmark shard's folder: its
// bugs.json, each campaign's and replay's report and log, the findings.
func TestPackKeepsABenchmarksResults(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeFiles(t, src, map[string]string{
		"bugs.json": "{}", "bugs.md": "# bugs",
		"campaigns/op-abc.log": strings.Repeat("x", 2*logTail) + "the end", "campaigns/op-abc/explore.json": "{}",
		"campaigns/op-abc/report.json": "{}", "campaigns/op-abc/findings/explore-2.yaml": "kind: Scenario",
		"campaigns/op-abc/explore-2/objects/pods": "dump", "campaigns/op-abc/report.html": "<html>",
		"replays/explore-2-on-op-abc.log": "ran", "replays/explore-2-on-op-abc/report.json": "{}",
		"replays/explore-2-on-op-abc/explore-2/objects/pods": "dump",
	})
	b, err := Pack(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unpack(b, dst); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bugs.json", "bugs.md", "campaigns/op-abc/explore.json", "campaigns/op-abc/report.json",
		"campaigns/op-abc/findings/explore-2.yaml", "replays/explore-2-on-op-abc.log", "replays/explore-2-on-op-abc/report.json"} {
		if _, err := os.Stat(filepath.Join(dst, name)); err != nil {
			t.Errorf("%s not carried: %v", name, err)
		}
	}
	for _, name := range []string{"campaigns/op-abc/explore-2/objects/pods", "campaigns/op-abc/report.html", "replays/explore-2-on-op-abc/explore-2/objects/pods"} {
		if _, err := os.Stat(filepath.Join(dst, name)); err == nil {
			t.Errorf("%s carried; want only the results the merge reads", name)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(dst, "campaigns/op-abc.log")); len(log) != logTail {
		t.Errorf("a campaign's log of %d bytes; want its last %d", len(log), logTail)
	}
}

func TestPackKeepsResultsOnly(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	writeFiles(t, src, map[string]string{
		"explore.json": "{}", "report.json": `{"seed":1}`, "explore.md": "# x",
		"findings/explore-3.yaml": "kind: Scenario", "findings/explore-3-resource.yaml": "kind: X",
		"report.html": "<html>", "explore-3/objects/pods": "dump",
		"explore-3/errors.txt": "converge: timed out", "explore-3/kind/operator-process.log": strings.Repeat("x", 2*logTail) + "the end",
	})
	b, err := Pack(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unpack(b, dst); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"explore.json", "report.json", "explore.md", "findings/explore-3.yaml", "findings/explore-3-resource.yaml", "explore-3/errors.txt"} {
		if _, err := os.Stat(filepath.Join(dst, name)); err != nil {
			t.Errorf("%s not carried: %v", name, err)
		}
	}
	for _, name := range []string{"report.html", "explore-3/objects/pods"} {
		if _, err := os.Stat(filepath.Join(dst, name)); err == nil {
			t.Errorf("%s carried; want only the results the merge reads", name)
		}
	}
	log, err := os.ReadFile(filepath.Join(dst, "explore-3/kind/operator-process.log"))
	if err != nil || len(log) != logTail || !strings.HasSuffix(string(log), "the end") {
		t.Errorf("operator log of %d bytes (%v); want its last %d, ending as the log does", len(log), err, logTail)
	}
}

func TestUnpackRefusesEscapes(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: "../evil", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	_ = gz.Close()
	err := Unpack(buf.Bytes(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not a file inside") {
		t.Errorf("error %v, want a refusal of ../evil", err)
	}
}

func TestPackRefusesMoreThanAConfigMapHolds(t *testing.T) {
	dir := t.TempDir()
	noise := make([]byte, 2*maxResults)
	r := rand.New(rand.NewPCG(1, 2)) // random bytes: nothing for gzip to squeeze
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	writeFiles(t, dir, map[string]string{"report.json": string(noise)})
	if _, err := Pack(dir); err == nil || !strings.Contains(err.Error(), "more than a ConfigMap holds") {
		t.Errorf("error %v, want one saying it does not fit", err)
	}
}

func TestPublishCreatesThenReplaces(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"explore.json": "{}"})
	c := fake.NewClientBuilder().Build()
	id := Identity{Namespace: "ns", Job: "explore-7", JobUID: "uid-1", Index: 2}
	for range 2 { // a rerun replaces the first one's ConfigMap
		if err := Publish(t.Context(), c, id, dir); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "explore-7-shard-2"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels[LabelJob] != "explore-7" || cm.Labels[LabelShard] != "2" {
		t.Errorf("labels %v", cm.Labels)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Kind != "Job" || cm.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("owners %+v; want the Job, so the ConfigMap goes with it", cm.OwnerReferences)
	}
	if err := Unpack(cm.BinaryData[ResultsKey], t.TempDir()); err != nil {
		t.Errorf("the published results do not unpack: %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvNamespace, "ns")
	t.Setenv(EnvJobName, "explore-7")
	t.Setenv(EnvJobUID, "uid-1")
	t.Setenv(EnvIndex, "1")
	id, err := FromEnv()
	if err != nil || id.Index != 1 || id.Job != "explore-7" {
		t.Errorf("identity %+v, error %v", id, err)
	}
	t.Setenv(EnvIndex, "")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "runs in a shard's pod") {
		t.Errorf("error %v, want one saying --publish belongs in a shard's pod", err)
	}
}
