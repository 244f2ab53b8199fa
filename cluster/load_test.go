package cluster

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindexec "sigs.k8s.io/kind/pkg/exec"
)

// fakeNode runs a node's commands as local shell scripts: containerd
// reports overlayfs, ctr's first `failures` imports fail as on a full
// disk, and df prints a full one.
type fakeNode struct {
	ctx      context.Context
	failures int
	imports  int
}

var _ nodes.Node = (*fakeNode)(nil)

func (n *fakeNode) Command(name string, args ...string) kindexec.Cmd {
	return n.CommandContext(n.ctx, name, args...)
}

func (n *fakeNode) CommandContext(ctx context.Context, name string, _ ...string) kindexec.Cmd {
	script := "exit 2"
	switch name {
	case "containerd":
		script = `printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\nsnapshotter = "overlayfs"\n'`
	case "ctr":
		n.imports++
		script = "cat >/dev/null"
		if n.imports <= n.failures {
			script += "; echo 'unpacking gauntlet.dev/x:1...' ; echo 'ctr: failed to extract layer: write /var/lib/containerd/x: no space left on device' >&2; exit 1"
		}
	case "df":
		script = `printf 'Filesystem Size Used Avail Use%% Mounted on\noverlay 252G 252G 0 100%% /\n'`
	}
	return kindexec.CommandContext(ctx, "sh", "-c", script)
}

func (n *fakeNode) String() string               { return "fake-control-plane" }
func (n *fakeNode) Role() (string, error)        { return "control-plane", nil }
func (n *fakeNode) IP() (string, string, error)  { return "", "", nil }
func (n *fakeNode) SerialLogs(w io.Writer) error { return nil }

func TestLoadArchive(t *testing.T) {
	loadRetryPause = 0
	tar := filepath.Join(t.TempDir(), "image.tar")
	if err := os.WriteFile(tar, []byte("not really a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		failures int
		wantErr  []string
	}{
		{name: "imported at once", failures: 0},
		{name: "imported on the second attempt", failures: 1},
		{name: "fails with what ctr printed and the node's disk", failures: loadAttempts, wantErr: []string{
			"no space left on device", "the node's disk: overlay 252G 252G 0 100% /",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			c := &Cluster{log: &log}
			n := &fakeNode{ctx: t.Context(), failures: tc.failures}
			err := c.loadArchive(t.Context(), n, tar)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("load failed: %v", err)
				}
			} else {
				if err == nil {
					t.Fatalf("load passed after %d imports, want an error", n.imports)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
			}
			if want := min(tc.failures+1, loadAttempts); n.imports != want {
				t.Errorf("ctr import ran %d times, want %d", n.imports, want)
			}
			if retried := strings.Contains(log.String(), "trying again"); retried != (tc.failures > 0) {
				t.Errorf("progress %q: retried=%v, want %v", log.String(), retried, tc.failures > 0)
			}
		})
	}
}
