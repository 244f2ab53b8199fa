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

// The last panic of a crash-looping operator names where it happened.
func TestLastPanic(t *testing.T) {
	log := `I1127 starting manager
panic: runtime error: index out of range [0] with length 0

goroutine 12 [running]:
example.com/op/old.Reconcile(0x0)
	/src/old.go:1 +0x1
I1127 starting manager
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x13a82cf]

goroutine 187 [running]:
redis-operator/k8sutils.enableRedisMonitoring({{0x388de322c420, 0x1c}})
	/src/k8sutils/statefulset.go:314 +0x20f
`
	want := "panic: runtime error: invalid memory address or nil pointer dereference in redis-operator/k8sutils.enableRedisMonitoring"
	if got, fn := lastPanic(log); got != want || fn != "redis-operator/k8sutils.enableRedisMonitoring" {
		t.Errorf("lastPanic:\n got %q in %q\nwant %q", got, fn, want)
	}
	if got, fn := lastPanic("I1127 starting manager\nE1127 an error\n"); got != "" || fn != "" {
		t.Errorf("no panic: got %q in %q", got, fn)
	}
	if got, fn := lastPanic("panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n"); got != "panic: boom in main.main" || fn != "main.main" {
		t.Errorf("a panic on the first line: got %q in %q", got, fn)
	}
}
