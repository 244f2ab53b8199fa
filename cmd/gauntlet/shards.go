package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/shard"
	"github.com/gauntlet-dev/gauntlet/cluster"
)

// shardFlags are explore's flags for a sharded campaign.
type shardFlags struct {
	shards, parallel int
	shard            string // k/n: run one shard
	publish          bool
	image            string
	cpu, memory      string
	// cpuQ and memoryQ are cpu and memory parsed, by validate.
	cpuQ, memoryQ resource.Quantity
}

func (s *shardFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&s.shards, "shards", 0, "run the campaign as this many shards of an Indexed Job on a cluster (--kubeconfig's, or a kind cluster made here: --multi-node for several nodes), each on its own envtest in its pod, and merge their results into one report")
	fs.IntVar(&s.parallel, "parallel", 0, "with --shards: how many shards run at once (default: all)")
	fs.StringVar(&s.image, "shard-image", "", "with --shards and --kubeconfig: the shard image, as the nodes pull it (gauntlet builds it here with Docker, names it, and asks you to push it when this is not given)")
	fs.StringVar(&s.cpu, "shard-cpu", "500m", "with --shards: each shard's CPU request")
	fs.StringVar(&s.memory, "shard-memory", "1Gi", "with --shards: each shard's memory request (its limit is twice that)")
	fs.StringVar(&s.shard, "shard", "", "run shard k/n of the campaign: the plan's sequences i with i mod n == k (a sharded campaign's Job passes it)")
	fs.BoolVar(&s.publish, "publish", false, "in a shard's pod: publish the campaign's results as a ConfigMap of its Job, where gauntlet explore --shards gathers them")
	cmd.MarkFlagsMutuallyExclusive("shards", "shard")
	cmd.MarkFlagsMutuallyExclusive("shards", "publish")
}

// validate refuses sharding flags that cannot work together.
func (s *shardFlags) validate(f *exploreFlags) error {
	switch {
	case s.shards < 0 || s.shards == 1:
		return usagef("--shards %d: give 2 or more (a single shard is the campaign itself)", s.shards)
	case s.shards > 0 && !f.onKind && f.kubeconfig == "":
		return usagef("--shards runs on a cluster: give --kind (a kind cluster made here) or --kubeconfig")
	case s.parallel < 0:
		return usagef("--parallel %d: give a positive number", s.parallel)
	case s.image != "" && f.kubeconfig == "":
		return usagef("--shard-image is for --kubeconfig's cluster; on a kind cluster made here the image is loaded into its nodes")
	case s.publish && s.shard == "":
		return usagef("--publish is for a shard's pod, which also has --shard k/n")
	}
	var err error
	if s.cpuQ, err = resource.ParseQuantity(s.cpu); err != nil {
		return usagef("--shard-cpu %q: %v", s.cpu, err)
	}
	if s.memoryQ, err = resource.ParseQuantity(s.memory); err != nil {
		return usagef("--shard-memory %q: %v", s.memory, err)
	}
	if s.shard != "" {
		k, n, err := report.ParseShard(s.shard)
		if err != nil {
			return usagef("--shard: %v", err)
		}
		f.o.Shard, f.o.Shards = k, n
	}
	return nil
}

// runShards is explore --shards: the bundle and its image built here, a
// cluster (made or given), the Job, and the merged report.
func (f *exploreFlags) runShards(ctx context.Context, stdout, stderr io.Writer) error {
	prog := newProgress(stderr)
	defer prog.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(prog), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	assets, err := envtestAssets(f.envtestAssets)
	if err != nil {
		return err
	}
	prog.Printf("seed %d; %d shards of the campaign over %s; report in %s", f.o.Seed, f.s.shards, f.loaded.OperatorFile, f.report)
	image := f.s.image
	if image == "" {
		if image, err = f.shardImage(ctx, prog, assets); err != nil {
			return err
		}
	}
	cfg, done, err := f.shardCluster(ctx, prog, image)
	if err != nil {
		return err
	}
	defer done()
	prog.Phase("shards")
	rep, err := shard.Run(ctx, shard.Options{
		Config: cfg,
		Job: shard.JobOptions{Name: fmt.Sprintf("explore-%d", f.o.Seed), Namespace: "gauntlet-explore",
			Image: image, Args: f.shardArgs(), Shards: f.s.shards, Parallelism: f.s.parallel,
			DeadlineSeconds: int64((f.o.Budget + 15*time.Minute).Seconds()),
			CPU:             f.s.cpuQ, Memory: f.s.memoryQ},
		Keep: f.keep, Out: f.report, OperatorFile: f.loaded.OperatorFile, Logf: prog.Printf,
	})
	prog.Done()
	prog.Clear()
	if rep != nil {
		_, _ = fmt.Fprint(stdout, rep.Campaign.Summary(f.loaded.OperatorFile, false))
		_, _ = fmt.Fprintf(stdout, "report: %s\n", filepath.Join(f.report, htmlreport.FileName))
	}
	if err != nil {
		return err
	}
	if len(rep.Campaign.Findings) > 0 || len(rep.Campaign.VersionSkews) > 0 {
		return errFailedRun
	}
	return nil
}

// shardImage writes the shard bundle and builds its image.
func (f *exploreFlags) shardImage(ctx context.Context, prog *progress, assets string) (string, error) {
	prog.Phase("shard image")
	defer prog.Done()
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "gauntlet-shard-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	overrides := map[string]string{}
	for k, v := range f.set {
		overrides[k] = v
	}
	if err := shard.WriteBundle(ctx, shard.BundleOptions{Set: f.loaded, Overrides: overrides,
		Gauntlet: self, Assets: assets, Dir: dir, Logf: prog.Printf}); err != nil {
		return "", fmt.Errorf("the shard bundle: %w", err)
	}
	return buildShardImage(ctx, prog, dir, f.kubeconfig)
}

// buildShardImage builds the shard image of the bundle in dir with the
// Docker engine. For an existing cluster (kubeconfig) it stops there:
// its nodes pull the image from a registry the user pushes it to.
func buildShardImage(ctx context.Context, prog *progress, dir, kubeconfig string) (string, error) {
	if err := ensureDockerEngine(ctx, prog); err != nil {
		return "", fmt.Errorf("the shard image is built with Docker: %w", err)
	}
	image, err := shard.BuildImage(ctx, dir, prog.Printf)
	if err != nil {
		return "", err
	}
	if kubeconfig != "" {
		return "", usagef("the shard image is built here as %s; push it to a registry the nodes of %s pull from and give its name as --shard-image", image, kubeconfig)
	}
	return image, nil
}

// shardCluster is the cluster the shards run on: --kubeconfig's, or a
// kind cluster made here with the shard image loaded into its nodes.
func (f *runFlags) shardCluster(ctx context.Context, prog *progress, image string) (*rest.Config, func(), error) {
	prog.Phase("cluster")
	defer prog.Done()
	if f.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		return cfg, func() {}, err
	}
	if err := f.resolveNodeImage(ctx, prog); err != nil {
		return nil, nil, err
	}
	if err := buildNodeImage(ctx, f.nodeImage, prog); err != nil {
		return nil, nil, err
	}
	c, err := cluster.Start(ctx, cluster.Options{NodeImage: f.nodeImage, ConfigFile: f.kindConfig, Keep: f.keep, Log: prog})
	if err != nil {
		return nil, nil, err
	}
	done := func() {
		if err := c.Teardown(); err != nil {
			prog.Printf("teardown: %v", err)
		}
	}
	cfg, _, err := c.Connect(ctx, nil)
	if err == nil {
		err = c.LoadImages(ctx, image)
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	return cfg, done, nil
}

// shardArgs are the campaign's flags as each shard takes them.
func (f *exploreFlags) shardArgs() []string {
	o := f.o
	args := []string{"explore", "-f", shard.BundleRoot + "/" + shard.BundleScenarios, "--envtest-assets", shard.BundleRoot + "/" + shard.BundleEnvtest,
		"--seed", strconv.FormatUint(o.Seed, 10), "--sequences", strconv.Itoa(o.Sequences), "--max-steps", strconv.Itoa(o.MaxSteps),
		"--budget", o.Budget.String(), "--max-findings", strconv.Itoa(o.MaxFindings)}
	if o.Base != "" {
		args = append(args, "--base", o.Base)
	}
	if o.NoShrink {
		args = append(args, "--no-shrink")
	}
	if o.NoFaults {
		args = append(args, "--no-faults")
	}
	for _, s := range o.SkipFields {
		args = append(args, "--skip-field", s)
	}
	for _, k := range slices.Sorted(maps.Keys(f.set)) {
		args = append(args, "--set", k+"="+f.set[k])
	}
	return append(args, "--shard", fmt.Sprintf("%s/%d", shard.Index, f.s.shards), "--report", shard.ReportDir, "--publish")
}

// publishShard stores a shard's results as its Job's ConfigMap, from
// inside its pod.
func publishShard(ctx context.Context, dir string) error {
	id, err := shard.FromEnv()
	if err != nil {
		return err
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("--publish: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	return shard.Publish(ctx, c, id, dir)
}
