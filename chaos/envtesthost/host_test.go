package envtesthost

import (
	"os"
	"path/filepath"
	"testing"
)

// A campaign tears down dozens of envtest hosts; each one's folder holds
// the operator's binary (about 95 MB for the reference operator), so one
// left behind per run fills a CI machine's disk.
func TestTeardownRemovesTheProcessFolder(t *testing.T) {
	work := filepath.Join(t.TempDir(), "gauntlet-operator-1")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "operator"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := &Host{work: work, logPath: filepath.Join(work, "operator.log")}
	if err := h.Teardown(); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Fatalf("the process folder %s is still there after teardown (stat: %v)", work, err)
	}
}
