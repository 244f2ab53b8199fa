package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap/zapcore"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/shard"
	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/cmd/gauntlet/bugbench"
)

// benchJobFlags are bench bugs' flags for a run as an Indexed Job: one
// shard per campaign.
type benchJobFlags struct {
	job         bool
	parallel    int
	cpu, memory string
	image       string
	cluster     runFlags
	// In a shard's pod: the plan, the campaign and whether to publish.
	plan     string
	campaign int
	publish  bool
}

func (j *benchJobFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&j.job, "job", false, "run the benchmark as an Indexed Job on a cluster (a kind cluster made here, --multi-node for several nodes, or --kubeconfig's): one shard per campaign, each running its campaign and its replays on envtest in its pod, every source built here first; the results merged into one")
	fs.IntVar(&j.parallel, "parallel", 0, "with --job: how many campaigns run at once (default: all)")
	fs.StringVar(&j.cpu, "shard-cpu", "500m", "with --job: each shard's CPU request")
	fs.StringVar(&j.memory, "shard-memory", "1Gi", "with --job: each shard's memory request (its limit is twice that)")
	fs.StringVar(&j.image, "shard-image", "", "with --job and --kubeconfig: the shard image, as the nodes pull it (gauntlet builds it here with Docker, names it, and asks you to push it when this is not given)")
	fs.StringVar(&j.cluster.kubeconfig, "kubeconfig", "", "with --job: run the shards on this existing cluster instead of a kind cluster made here")
	fs.StringVar(&j.cluster.nodeImage, "node-image", os.Getenv("GAUNTLET_NODE_IMAGE"), "with --job: the kind node image (default as gauntlet run's)")
	fs.BoolVar(&j.cluster.keep, "keep-cluster", false, "with --job: leave the kind cluster, the namespace and the Job in place")
	fs.StringVar(&j.cluster.envtestAssets, "envtest-assets", os.Getenv("KUBEBUILDER_ASSETS"), "with --job: the folder with kube-apiserver and etcd the shards' image takes (default $KUBEBUILDER_ASSETS; in a Gauntlet checkout, bin/k8s)")
	fs.StringVar(&j.plan, "plan", "", "in a shard's pod: the plan of a run as shards (bench bugs --job writes it into the shards' image)")
	fs.IntVar(&j.campaign, "campaign", -1, "in a shard's pod, with --plan: the index of the campaign to run")
	fs.BoolVar(&j.publish, "publish", false, "in a shard's pod: publish the campaign's results as a ConfigMap of its Job")
	for _, name := range []string{"plan", "campaign", "publish"} {
		_ = fs.MarkHidden(name)
	}
}

// validate refuses --job flags that cannot work together.
func (j *benchJobFlags) validate(o *bugbench.Options) error {
	switch {
	case j.plan != "" && j.campaign < 0:
		return usagef("--plan goes with --campaign k (a shard's index)")
	case j.plan != "":
		return nil
	case !j.job:
		if j.cluster.kubeconfig != "" || j.image != "" || j.parallel != 0 {
			return usagef("--kubeconfig, --shard-image and --parallel go with --job")
		}
		return nil
	case o.Kind || o.Shards > 0:
		return usagef("--job runs each campaign on envtest in its own pod: it goes without --kind and --shards")
	case j.parallel < 0:
		return usagef("--parallel %d: give a positive number", j.parallel)
	case j.image != "" && j.cluster.kubeconfig == "":
		return usagef("--shard-image is for --kubeconfig's cluster; on a kind cluster made here the image is loaded into its nodes")
	case o.MultiNode && j.cluster.kubeconfig != "":
		return usagef("--multi-node makes a kind cluster; --kubeconfig's is as it is")
	}
	for _, q := range []string{j.cpu, j.memory} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return usagef("--shard-cpu/--shard-memory %q: %v", q, err)
		}
	}
	o.Job = true
	j.cluster.multiNode = o.MultiNode
	j.cluster.kubernetesVersion = getenv("GAUNTLET_KUBERNETES_VERSION", cluster.NodeImages[0].Minor)
	j.cluster.offline = os.Getenv("GAUNTLET_OFFLINE") != ""
	return nil
}

// campaignAllowance is what a shard takes beyond its campaign's budget:
// its replays (one per cause, on the buggy source and on each fix) and
// envtest's start. The Job's deadline is that and the budget per wave of
// campaigns.
const campaignAllowance = 30 * time.Minute

// runJob is bench bugs --job: every source made and built here into one
// image, a cluster (made or given), the Indexed Job, and the shards'
// results merged.
func (f *benchBugsFlags) runJob(ctx context.Context, r *bugbench.Runner, bugs []bugbench.Bug, stderr io.Writer) (*bugbench.Result, error) {
	start := time.Now()
	prog := newProgress(stderr)
	defer prog.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(prog), zap.Level(zapcore.ErrorLevel)))
	j := &f.j
	assets, err := envtestAssets(j.cluster.envtestAssets)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gauntlet-bench-shard-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	plan, err := f.bundle(ctx, prog, r, bugs, assets, dir)
	if err != nil {
		return nil, err
	}
	if len(plan.Campaigns) == 0 { // every bug's operator without a bench stanza
		res := bugbench.Merge(plan, nil, shard.ReportDir, time.Since(start))
		return res, res.Write(r.Out)
	}
	image := j.image
	if image == "" {
		prog.Phase("shard image")
		image, err = buildShardImage(ctx, prog, dir, j.cluster.kubeconfig)
		prog.Done()
		if err != nil {
			return nil, err
		}
	}
	cfg, done, err := j.cluster.shardCluster(ctx, prog, image)
	if err != nil {
		return nil, err
	}
	defer done()
	prog.Phase("campaigns")
	dirs, jerr := shard.RunJob(ctx, shard.Options{Config: cfg, Job: j.jobOptions(plan, image), Keep: j.cluster.keep, Out: r.Out, Logf: prog.Printf})
	prog.Done()
	prog.Clear()
	if jerr != nil && len(dirs) == 0 {
		return nil, jerr
	}
	res := bugbench.Merge(plan, dirs, shard.ReportDir, time.Since(start))
	return res, errors.Join(jerr, res.Write(r.Out))
}

// bundle writes the programs and every source the plan needs into dir,
// and the plan itself.
func (f *benchBugsFlags) bundle(ctx context.Context, prog *progress, r *bugbench.Runner, bugs []bugbench.Bug, assets, dir string) (*bugbench.Plan, error) {
	prog.Phase("sources")
	defer prog.Done()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := shard.WritePrograms(self, assets, dir); err != nil {
		return nil, err
	}
	r.Progress = prog
	plan, err := r.Prepare(ctx, bugs, func(ctx context.Context, key, scenarios string, set map[string]string) (string, error) {
		loaded, err := scenario.LoadPaths(scenarios)
		if err != nil {
			return "", err
		}
		root := shard.BundleRoot + "/trees/" + key
		err = shard.WriteOperator(ctx, shard.OperatorBundle{Set: loaded, Overrides: set,
			Dir: filepath.Join(dir, "trees", key), Root: root, Logf: prog.Printf})
		return root + "/" + shard.BundleScenarios, err
	})
	if err != nil {
		return nil, err
	}
	prog.Printf("campaigns: %d; bugs without one: %d", len(plan.Campaigns), len(plan.NotRun))
	return plan, bugbench.WritePlan(plan, filepath.Join(dir, benchPlan))
}

// benchPlan is the plan's file in the shards' bundle.
const benchPlan = "plan.json"

// jobOptions are the Job of a plan: shard k runs campaign k.
func (j *benchJobFlags) jobOptions(plan *bugbench.Plan, image string) shard.JobOptions {
	n := len(plan.Campaigns)
	parallel := j.parallel
	if parallel <= 0 || parallel > n {
		parallel = n
	}
	waves := (n + parallel - 1) / parallel
	deadline := time.Duration(waves) * (plan.Options.Budget + campaignAllowance)
	return shard.JobOptions{
		Name: fmt.Sprintf("bench-bugs-%d", plan.Options.Seed), Namespace: "gauntlet-bench", Image: image,
		Args: []string{"bench", "bugs", "--plan", shard.BundleRoot + "/" + benchPlan, "--campaign", shard.Index,
			"--report", shard.ReportDir, "--publish"},
		Env:    []corev1.EnvVar{{Name: "KUBEBUILDER_ASSETS", Value: shard.BundleRoot + "/" + shard.BundleEnvtest}},
		Shards: n, Parallelism: parallel, DeadlineSeconds: int64(deadline.Seconds()),
		CPU: resource.MustParse(j.cpu), Memory: resource.MustParse(j.memory),
	}
}

// runShard is a shard's pod: campaign k of the plan, its results
// published as its Job's ConfigMap.
func (f *benchBugsFlags) runShard(ctx context.Context, stderr io.Writer) (*bugbench.Result, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(stderr), zap.Level(zapcore.ErrorLevel)))
	plan, err := bugbench.ReadPlan(f.j.plan)
	if err != nil {
		return nil, err
	}
	if f.j.campaign >= len(plan.Campaigns) {
		return nil, usagef("--campaign %d: the plan has %d", f.j.campaign, len(plan.Campaigns))
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	out := f.out
	if out == "" {
		out = shard.ReportDir
	}
	r := &bugbench.Runner{Options: plan.Options, Out: out, Gauntlet: selfRunner(self), Progress: stderr}
	res, err := r.RunPlanned(ctx, plan.Campaigns[f.j.campaign])
	if err != nil || !f.j.publish {
		return res, err
	}
	return res, publishShard(ctx, out)
}
