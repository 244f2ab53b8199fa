package bugbench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// inShard plays gauntlet in a shard's pod, where a tree is known by its
// bundled folder (trees/<key>/scenarios) and no --set hands it over: it
// calls the host's fake with the tree as that one reads it.
func (g *fakeGauntlet) inShard(ctx context.Context, args []string, log string) (int, error) {
	if slices.Contains(args, "--set") {
		return 0, fmt.Errorf("a shard's command with --set, which names a tree on the host: %v", args)
	}
	folder := args[slices.Index(args, "-f")+1]
	if args[0] == "run" {
		folder = filepath.Dir(folder) // its Operator file's
	}
	key := filepath.Base(filepath.Dir(folder))
	return g.run(ctx, append(slices.Clone(args), "--set", "SRC=/src/"+key, "--set", "FIXED=/src/"+key), log)
}

// A benchmark as shards: every tree its campaigns and replays need is
// made and bundled once, each campaign runs in its own shard from the
// plan alone, and the merged results judge every bug as a run here does,
// with their paths where the shards' folders were unpacked.
func TestAPlanRunsEachCampaignInItsShard(t *testing.T) {
	r, g, f, c1 := benchFixture(t)
	bundles := t.TempDir()
	bundled := map[string]map[string]string{}
	plan, err := r.Prepare(t.Context(), f.Bugs, func(_ context.Context, key, scenarios string, set map[string]string) (string, error) {
		if _, again := bundled[key]; again {
			t.Errorf("%s bundled twice", key)
		}
		bundled[key] = set
		dir := filepath.Join(bundles, "trees", key, "scenarios")
		write(t, filepath.Join(dir, "operator.yaml"), "apiVersion: gauntlet.dev/v1alpha1\nkind: Operator\nmetadata: {name: o}\nspec:\n  namespace: ns\n  selector: {a: b}\n  manifests: [m.yaml]\n")
		return dir, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Campaigns) != 2 || len(plan.NotRun) != 1 || plan.NotRun[0].Bug.ID != "no-door" {
		t.Fatalf("%d campaigns and not run %+v; want 2 and no-door", len(plan.Campaigns), plan.NotRun)
	}
	c2 := *f.Bugs[0].FixCommit
	// quiet's fix, the change of c1 (the first commit, with no parent),
	// cannot be made: it is left out, for its replays to say so.
	if len(bundled) != 3 {
		t.Errorf("bundled %v; want the two buggy trees and found's fix", slices.Sorted(maps.Keys(bundled)))
	}
	for _, tree := range []Tree{{Operator: "o/p", Commit: c1}, {Operator: "o/p", Commit: c1, Pick: c2}, {Operator: "o/p", Commit: c2}} {
		set, ok := bundled[tree.Key()]
		if !ok {
			t.Errorf("%s not bundled (bundled %v)", tree.Key(), slices.Sorted(maps.Keys(bundled)))
			continue
		}
		if filepath.Base(set["SRC"]) != tree.Key() || set["FIXED"] == "" {
			t.Errorf("%s bundled with %v; want SRC its own tree and FIXED set", tree.Key(), set)
		}
	}
	if err := WritePlan(plan, filepath.Join(bundles, "plan.json")); err != nil {
		t.Fatal(err)
	}
	if plan, err = ReadPlan(filepath.Join(bundles, "plan.json")); err != nil {
		t.Fatal(err)
	}

	// Each shard's pod writes into the same folder; its results are then
	// unpacked into their own, as the Job's ConfigMaps are.
	pod, shards := filepath.Join(t.TempDir(), "report"), t.TempDir()
	dirs := map[int]string{}
	for k := range plan.Campaigns[:1] { // the second shard publishes nothing
		shardRunner := &Runner{Options: plan.Options, Out: pod, Gauntlet: g.inShard}
		if _, err := shardRunner.RunPlanned(t.Context(), plan.Campaigns[k]); err != nil {
			t.Fatal(err)
		}
		dirs[k] = filepath.Join(shards, fmt.Sprintf("shard-%d", k))
		if err := os.Rename(pod, dirs[k]); err != nil {
			t.Fatal(err)
		}
	}
	res := Merge(plan, dirs, pod, time.Minute)
	verdicts := map[string]string{}
	for _, b := range res.Bugs {
		verdicts[b.Bug.ID] = b.Verdict
	}
	if want := map[string]string{"found": Found, "no-fix": NoFix, "quiet": Error, "no-door": NotRun}; !maps.Equal(verdicts, want) {
		t.Errorf("verdicts %v, want %v (calls %v)", verdicts, want, g.calls)
	}
	if got := res.Totals; got.Found != 1 || got.Unattributed != 1 || got.Irreproducible != 1 || got.Errors != 1 || got.NotRun != 1 {
		t.Errorf("totals %+v", got)
	}
	if c := res.Campaigns[1]; !strings.Contains(c.Error, "shard 1: published no results") {
		t.Errorf("the second campaign's error %q; want its shard named", c.Error)
	}
	found := res.Bugs[slices.IndexFunc(res.Bugs, func(b BugResult) bool { return b.Bug.ID == "found" })]
	for _, p := range []string{res.Campaigns[0].Report, found.Finding.OnBuggy.Report} {
		if !strings.HasPrefix(p, dirs[0]+"/") {
			t.Errorf("path %s is not under the shard's folder %s", p, dirs[0])
		} else if _, err := os.Stat(p); err != nil {
			t.Errorf("path %s: %v", p, err)
		}
	}
}

// A replay whose setup failed (envtest slow to start on shared cores)
// runs once more; one that fails so twice is an error naming the setup.
func TestAReplayWhoseSetupFailedRunsOnceMore(t *testing.T) {
	r, g, f, c1 := benchFixture(t)
	buggy := Tree{Operator: "o/p", Commit: c1}.Key()
	g.setupFails = map[string]int{"/f/explore-2.yaml on " + buggy: 1, "/f/explore-5.yaml on " + buggy: 2}
	res, err := r.Run(t.Context(), f.Bugs[:2])
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Finding{}
	for _, fi := range res.Campaigns[0].Findings {
		byName[fi.Scenario] = fi
	}
	if got := byName["explore-2"].OnBuggy; got.Verdict != Fails || got.Error != "" {
		t.Errorf("explore-2 on the buggy source after one failed setup: %+v; want it run again and failing", got)
	}
	if got := byName["explore-5"].OnBuggy; !strings.Contains(got.Error, "the replay's setup failed at setup: timeout waiting for process kube-apiserver") {
		t.Errorf("explore-5 after two failed setups: %+v; want an error naming the setup", got)
	}
	if n := strings.Count(strings.Join(g.calls, "\n"), "run "+buggy+" /f/explore-5.yaml"); n != 2 {
		t.Errorf("explore-5 ran %d times on the buggy source, want 2: %v", n, g.calls)
	}
}
