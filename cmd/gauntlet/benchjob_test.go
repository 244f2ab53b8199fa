package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gauntlet-dev/gauntlet/cmd/gauntlet/bugbench"
)

// The Job of a plan: a shard per campaign, each told its index and the
// plan in its image, envtest's binaries where the image holds them, and a
// deadline of a campaign and its replays per wave of shards.
func TestBenchJobIsAShardPerCampaign(t *testing.T) {
	plan := &bugbench.Plan{Options: bugbench.Options{Seed: 3, Budget: 10 * time.Minute}, Campaigns: make([]bugbench.Planned, 5)}
	j := &benchJobFlags{parallel: 2, cpu: "500m", memory: "1Gi"}
	o := j.jobOptions(plan, "gauntlet.dev/explore-shard:abc")
	if o.Shards != 5 || o.Parallelism != 2 || o.Name != "bench-bugs-3" {
		t.Errorf("%d shards, %d at a time, named %s; want 5, 2, bench-bugs-3", o.Shards, o.Parallelism, o.Name)
	}
	want := "bench bugs --plan /gauntlet/plan.json --campaign $(JOB_COMPLETION_INDEX) --report /tmp/report --publish"
	if got := strings.Join(o.Args, " "); got != want {
		t.Errorf("args %q, want %q", got, want)
	}
	if len(o.Env) != 1 || o.Env[0].Name != "KUBEBUILDER_ASSETS" || o.Env[0].Value != "/gauntlet/k8s" {
		t.Errorf("env %v; want KUBEBUILDER_ASSETS at the bundle's envtest", o.Env)
	}
	if want := int64((3 * (10*time.Minute + campaignAllowance)).Seconds()); o.DeadlineSeconds != want {
		t.Errorf("deadline %ds; want %ds: three waves of a campaign and its replays", o.DeadlineSeconds, want)
	}
	j.parallel = 0
	if o := j.jobOptions(plan, "x"); o.Parallelism != 5 {
		t.Errorf("parallelism %d by default; want every campaign at once", o.Parallelism)
	}
}
