package scenario

import "testing"

// A path a file names is relative to the file's folder unless absolute.
func TestBeside(t *testing.T) {
	if got := Beside("/s/scenarios", "cluster.yaml"); got != "/s/scenarios/cluster.yaml" {
		t.Errorf("relative: %s", got)
	}
	if got := Beside("/s/scenarios", "/work/cluster.yaml"); got != "/work/cluster.yaml" {
		t.Errorf("absolute: %s", got)
	}
}
