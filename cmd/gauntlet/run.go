package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/install"
	"github.com/gauntlet-dev/gauntlet/chaos/preflight"
	"github.com/gauntlet-dev/gauntlet/chaos/relay"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// defaultParallel is how many scenarios run at once by default: on two
// cores and one kind node, three of the reference scenarios side by side
// keep their timing budgets (docs/BENCHMARKS.md has the run).
const defaultParallel = 3

// referenceScenarios are the reference operator's scenario files, the
// default inside a Gauntlet checkout.
const referenceScenarios = "suites/chaos/scenarios"

// runFlags are gauntlet run's flags (replay and list share some).
type runFlags struct {
	files                      []string
	set                        map[string]string
	operatorArgs               []string
	scenarios                  []string
	seed                       int64
	parallel                   int
	report                     string
	kubeconfig                 string
	nodeImage, kindConfig      string
	kubernetesVersion          string
	offline                    bool
	keep, buildImages, verbose bool
	keepOnFailure              bool
	multiNode                  bool
	envtest                    bool
	envtestAssets              string
	proxyAddress               string
	proxyRelay                 bool
	relayImage                 string
	pushTo                     string
	// proxy puts the API proxy in front of the operator on a cluster
	// whatever the files hold (explore's campaigns make view faults).
	proxy              bool
	chaosRegistry      string
	chaosController    string
	chaosDaemon, pause string
	timeout            time.Duration
	// imagesReady waits for images still building while kind makes the
	// cluster (prepareImages); nil when none are.
	imagesReady func(context.Context) error

	loaded    *scenario.Set
	overrides map[string]string
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// registerFiles adds -f, the flag every command that reads scenario files
// takes.
func (f *runFlags) registerFiles(cmd *cobra.Command) {
	cmd.Flags().StringSliceVarP(&f.files, "file", "f", nil, "scenario files or directories (docs/scenarios.md; default in a Gauntlet checkout: "+referenceScenarios+")")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
}

func (f *runFlags) register(cmd *cobra.Command, withSelection bool) {
	f.registerFiles(cmd)
	f.registerImages(cmd)
	fs := cmd.Flags()
	fs.StringToStringVar(&f.set, "set", nil, "override a variable of the files, NAME=VALUE (repeat)")
	fs.StringArrayVar(&f.operatorArgs, "operator-arg", nil, "append an argument to the operator's container (repeat)")
	if withSelection {
		fs.StringSliceVar(&f.scenarios, "scenario", nil, "scenarios to run, by name or glob such as 'leader-*' (repeat or comma-separate; default: all; see gauntlet list)")
		fs.Int64Var(&f.seed, "seed", -1, "seed for every choice of target and timing (default: from the clock, printed); replays a run")
		fs.IntVar(&f.parallel, "parallel", defaultParallel, "scenarios run at once, each in its own namespace; one whose fault reaches beyond its namespace (the operator, a node, the API proxy) runs alone, and one that fails beside others runs again alone (1: one after another)")
		_ = cmd.RegisterFlagCompletionFunc("scenario", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			names, _ := f.names()
			return names, cobra.ShellCompDirectiveNoFileComp
		})
	}
	fs.StringVar(&f.report, "report", "", "folder for the report (default: artifacts/chaos-<UTC time>)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "run on this existing cluster instead of creating a kind cluster (its nodes must be able to pull the images)")
	fs.StringVar(&f.proxyAddress, "proxy-address", "", "with --kubeconfig: the IP address at which the cluster's pods reach this machine, where the API proxy for view faults listens (for a kind cluster on this machine, its network's gateway: docker network inspect kind); without it they reach the proxy through the API relay (--relay-image)")
	fs.BoolVar(&f.proxyRelay, "proxy-relay", false, "on a kind cluster created here too, let the operator's pods reach the API proxy through the API relay, a pod tunnelled to this machine over a port-forward (as an existing cluster does without --proxy-address), not through the kind network's gateway")
	fs.StringVar(&f.relayImage, "relay-image", getenv("GAUNTLET_RELAY_IMAGE", relay.Image), "the API relay's image (make relay-image builds it): loaded into a kind cluster created here; with --kubeconfig, the nodes must pull it")
	cmd.MarkFlagsMutuallyExclusive("proxy-relay", "proxy-address")
	fs.BoolVar(&f.envtest, "envtest", false, "run on envtest (a kube-apiserver and etcd on this machine; no Docker, no Chaos Mesh) with the operator as a process behind the API proxy, as its Operator file's spec.process says: for view faults; Chaos Mesh faults are skipped")
	fs.StringVar(&f.envtestAssets, "envtest-assets", os.Getenv("KUBEBUILDER_ASSETS"), "folder with kube-apiserver and etcd for --envtest (default $KUBEBUILDER_ASSETS; in a Gauntlet checkout, make envtest-bins builds them under bin/k8s)")
	cmd.MarkFlagsMutuallyExclusive("envtest", "kubeconfig")
	cmd.MarkFlagsMutuallyExclusive("envtest", "multi-node")
	fs.StringVar(&f.pushTo, "push-to", "", "with --kubeconfig: push the images the run needs (the Operator file's, Chaos Mesh's, the API relay's) from this machine's Docker engine to this registry, each at its own path (gauntlet.dev/etcd:v3.6.16 as <registry>/etcd:v3.6.16), for nodes that mirror the images' registries to it; nothing in the manifests is rewritten")
	fs.BoolVar(&f.keep, "keep-cluster", false, "leave the kind cluster running and print how to reach it")
	fs.BoolVar(&f.keepOnFailure, "keep-cluster-on-failure", os.Getenv("GAUNTLET_KEEP_CLUSTER_ON_FAILURE") != "", "leave the kind cluster running when the setup fails (the operator or Chaos Mesh does not come up), to look at it (env GAUNTLET_KEEP_CLUSTER_ON_FAILURE)")
	fs.BoolVar(&f.buildImages, "build-images", true, "inside a Gauntlet checkout, build the images the run needs that are missing (make operator-image, etcd-images, chaos-images, node-image ...); each is reused when present")
	fs.BoolVar(&f.verbose, "verbose", false, "also print client-go's own log (port-forwards broken by killed pods, retries)")
	fs.StringVar(&f.pause, "pause-image", install.DefaultPauseImage, "image pod-failure swaps in (must be on the nodes)")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Minute, "bound on the whole run")
	_ = cmd.MarkFlagFilename("kubeconfig")
	_ = cmd.MarkFlagDirname("report")
}

// registerImages adds the flags that choose a kind cluster's node image
// and config and Chaos Mesh's images (run, explore and images take them).
func (f *runFlags) registerImages(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.nodeImage, "node-image", os.Getenv("GAUNTLET_NODE_IMAGE"), "kind node image (default: kind's kindest/node for --kubernetes-version when the Docker engine has it or pulls it, else gauntlet.dev/kind-node built offline; gauntlet.dev/* images are built when missing)")
	fs.StringVar(&f.kubernetesVersion, "kubernetes-version", getenv("GAUNTLET_KUBERNETES_VERSION", cluster.NodeImages[0].Minor), "Kubernetes minor of a kind cluster made here ("+nodeMinors()+"), when --node-image is not given")
	fs.BoolVar(&f.offline, "offline", os.Getenv("GAUNTLET_OFFLINE") != "", "pull nothing: build the kind node image and Chaos Mesh's images here (from Go modules and Debian packages) rather than pull kind's and Chaos Mesh's (env GAUNTLET_OFFLINE)")
	cmd.MarkFlagsMutuallyExclusive("node-image", "kubernetes-version")
	cmd.MarkFlagsMutuallyExclusive("node-image", "offline")
	fs.StringVar(&f.kindConfig, "kind-config", os.Getenv("GAUNTLET_KIND_CONFIG"), "kind cluster config (default: the one built in for the node image, written under the user's cache folder; gauntlet images prints its path)")
	fs.BoolVar(&f.multiNode, "multi-node", false, "create the multi-node kind cluster (a control plane and three workers, for node-loss scenarios) instead of the single-node default")
	cmd.MarkFlagsMutuallyExclusive("multi-node", "kind-config")
	fs.StringVar(&f.chaosRegistry, "chaos-mesh-registry", getenv("GAUNTLET_CHAOS_MESH_REGISTRY", install.ReleaseRegistry), "registry of Chaos Mesh's "+install.ReleaseTag+" release images, as its Helm chart's images.registry (a mirror of ghcr.io, say registry.example.com/ghcr); pulled when the Docker engine lacks them, else built here (env GAUNTLET_CHAOS_MESH_REGISTRY)")
	fs.StringVar(&f.chaosController, "chaos-controller-image", os.Getenv("CHAOS_CONTROLLER_IMAGE"), "Chaos Mesh controller-manager image (default: the release image in --chaos-mesh-registry when the Docker engine has it or pulls it, else "+install.DefaultControllerImage+" built here)")
	fs.StringVar(&f.chaosDaemon, "chaos-daemon-image", os.Getenv("CHAOS_DAEMON_IMAGE"), "Chaos Mesh chaos-daemon image (default: as --chaos-controller-image)")
	_ = cmd.MarkFlagFilename("kind-config", "yaml", "yml")
}

// load reads and checks the scenario files (the reference operator's by
// default inside a Gauntlet checkout): every mistake is refused here,
// before any cluster is touched.
func (f *runFlags) load() error {
	if f.loaded != nil {
		return nil
	}
	files := f.files
	if len(files) == 0 {
		root := repoRoot()
		if root == "" {
			return usagef("-f is required outside a Gauntlet checkout: the scenario files to run (docs/scenarios.md)")
		}
		files = []string{filepath.Join(root, referenceScenarios)}
	}
	set, err := scenario.LoadPaths(files...)
	if err != nil {
		return usagef("%w", err)
	}
	f.loaded = set
	return nil
}

// names are the loaded scenarios' names, in file order.
func (f *runFlags) names() ([]string, error) {
	if err := f.load(); err != nil {
		return nil, err
	}
	var names []string
	for _, s := range f.loaded.Scenarios {
		names = append(names, s.Metadata.Name)
	}
	return names, nil
}

// selectFrom expands names and globs into scenario names, in the given
// order; an unknown one is an error that lists the valid choices.
func selectFrom(all, patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return all, nil
	}
	picked := map[string]bool{}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		n := 0
		for _, name := range all {
			if ok, err := path.Match(p, name); err != nil {
				return nil, fmt.Errorf("--scenario %q: %w", p, err)
			} else if ok {
				picked[name] = true
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("--scenario %q matches no scenario; the scenarios are:\n  %s", p, strings.Join(all, "\n  "))
		}
	}
	var out []string
	for _, name := range all {
		if picked[name] {
			out = append(out, name)
		}
	}
	return out, nil
}

// validate checks every flag and the files before anything is started.
func (f *runFlags) validate() error {
	if f.seed < -1 {
		return usagef("--seed %d: want a non-negative integer", f.seed)
	}
	if f.timeout <= 0 {
		return usagef("--timeout %s: want a positive duration", f.timeout)
	}
	all, err := f.names()
	if err != nil {
		return err
	}
	if _, err := selectFrom(all, f.scenarios); err != nil {
		return usageError{err}
	}
	if f.proxyAddress != "" {
		if f.kubeconfig == "" {
			return usagef("--proxy-address goes with --kubeconfig: the pods of a cluster created here reach this machine on the kind network's gateway")
		}
		if net.ParseIP(f.proxyAddress) == nil {
			return usagef("--proxy-address %q: want the IP address at which the cluster's pods reach this machine", f.proxyAddress)
		}
	}
	if f.pushTo != "" {
		if f.kubeconfig == "" {
			return usagef("--push-to goes with --kubeconfig: a kind cluster created here gets the images loaded into its nodes")
		}
		if _, err := name.NewRegistry(f.pushTo, name.StrictValidation); err != nil || strings.ContainsAny(f.pushTo, "/@") {
			return usagef("--push-to %q: want a registry's host[:port], such as 127.0.0.1:5001 or registry.example.com", f.pushTo)
		}
	}
	if f.kubeconfig != "" {
		if _, err := os.Stat(f.kubeconfig); err != nil {
			return usagef("--kubeconfig: %w", err)
		}
	}
	if f.envtest {
		return nil // no kind cluster to configure, no Chaos Mesh
	}
	return f.validateImages()
}

// validateImages checks the flags registerImages adds: the Chaos Mesh
// registry, and for a kind cluster made here its minor and config.
func (f *runFlags) validateImages() error {
	if ctrl, _ := install.ReleaseImages(f.chaosRegistry); !validImage(ctrl) {
		return usagef("--chaos-mesh-registry %q: want a registry's host[:port] and an optional path, such as ghcr.io or registry.example.com/ghcr", f.chaosRegistry)
	}
	if f.kubeconfig != "" {
		return nil // no kind cluster to configure
	}
	if _, err := cluster.NodeImageFor(f.kubernetesVersion); err != nil {
		return usagef("--kubernetes-version: %v", err)
	}
	if f.kindConfig == "" {
		return nil // chosen with the node image (resolveNodeImage)
	}
	if _, err := os.Stat(f.kindConfig); err != nil && !filepath.IsAbs(f.kindConfig) {
		// A path relative to the repository, from anywhere in it.
		f.kindConfig = framework.CRDPath(f.kindConfig)
	}
	if _, err := os.Stat(f.kindConfig); err != nil {
		return usagef("--kind-config: %w", err)
	}
	return nil
}

// nodeMinors lists the Kubernetes minors kind clusters are made at.
func nodeMinors() string {
	minors := make([]string, len(cluster.NodeImages))
	for i, n := range cluster.NodeImages {
		minors[i] = n.Minor
	}
	return strings.Join(minors, ", ")
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:     "run",
		Aliases: []string{"chaos"},
		Short:   "Run chaos scenario files and write a report",
		Long: `run does everything from a bare machine: checks the scenario files, checks the
Docker engine (starting one in a Gauntlet checkout), builds the images that
are missing, creates a kind cluster (or uses --kubeconfig), deploys the
operator the Operator file describes and Chaos Mesh, runs each scenario on a
fresh resource, and writes report.html, report.json, summary.md and
junit.xml. Each phase prints a progress line with its duration; a long wait
says what it is waiting for.`,
		Example: `  gauntlet run                                      # the reference operator's scenarios
  gauntlet run --scenario leader-pod-kill --scenario 'leader-*' --seed 7
  gauntlet run -f my-operator/scenarios --kubeconfig ~/.kube/config --set OPERATOR_IMAGE=registry.example/op:v1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.parallel < 1 {
				return usagef("--parallel %d: give 1 (one scenario after another) or more", f.parallel)
			}
			if err := f.validate(); err != nil {
				return err
			}
			return runChaos(cmd.Context(), f, nil, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, true)
	return cmd
}

// runOptions are the engine's options for the run the flags ask for: the
// scenarios selected, the seed (--seed, else drawn from the clock), seeds
// pinned by a replay, and the report's folder (a new dated one under the
// artifacts folder unless --report names one).
func (f *runFlags) runOptions(seeds map[string]uint64) (engine.RunOptions, error) {
	all, err := f.names()
	if err != nil {
		return engine.RunOptions{}, err
	}
	names, err := selectFrom(all, f.scenarios)
	if err != nil {
		return engine.RunOptions{}, usageError{err}
	}
	ro := engine.RunOptions{Seed: uint64(time.Now().UnixNano() % 1_000_000), Seeds: seeds, Only: names, Artifacts: f.report, Parallel: f.parallel}
	if f.seed >= 0 {
		ro.Seed = uint64(f.seed)
	}
	if ro.Artifacts == "" {
		ro.Artifacts = filepath.Join(framework.ArtifactsDir(), "chaos-"+time.Now().UTC().Format("20060102-150405"))
	}
	return ro, nil
}

// runChaos makes the run: images, cluster, operator, Chaos Mesh, the
// scenarios, the report. seeds pins recorded seeds (replay).
func runChaos(ctx context.Context, f *runFlags, seeds map[string]uint64, stdout, stderr io.Writer) error {
	return withEngine(ctx, f, seeds, stdout, stderr, runScenarios)
}

// engineAct is what a command does once the engine is up.
type engineAct func(ctx context.Context, e *engine.Engine, ro engine.RunOptions, prog *progress, stdout io.Writer) error

// withEngine brings up what the flags ask for (images, cluster or
// envtest, operator, Chaos Mesh), hands it to act and tears it down.
func withEngine(ctx context.Context, f *runFlags, seeds map[string]uint64, stdout, stderr io.Writer, act engineAct) error {
	prog := newProgress(stderr)
	defer prog.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(prog), zap.Level(zapcore.ErrorLevel)))
	if !f.verbose {
		// client-go reports every port-forward a killed pod breaks: expected
		// under chaos, and noise in a run's progress.
		klog.SetLogger(logr.Discard())
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	ctx = framework.WithWaitObserver(ctx, prog.Waiting)

	ro, err := f.runOptions(seeds)
	if err != nil {
		return err
	}
	unlock, err := lockReport(ro.Artifacts)
	if err != nil {
		return err
	}
	defer unlock()
	prog.Printf("seed %d (replay with --seed %d); %d scenarios of %s; report in %s", ro.Seed, ro.Seed, len(ro.Only), f.loaded.OperatorFile, ro.Artifacts)

	f.overrides = map[string]string{}
	if root := repoRoot(); root != "" {
		builtChaosImages(root, f)
	}
	for k, v := range f.set {
		f.overrides[k] = v
	}
	unserved, err := preflight.Check(f.loaded, f.overrides)
	if err != nil {
		return usagef("the files do not fit the operator's manifests:\n%w", err)
	}
	if f.kubeconfig == "" && len(unserved) > 0 {
		// A cluster made here serves Kubernetes' kinds and the manifests'
		// CRDs only: say so now rather than after making it.
		return usagef("the operator's manifests hold objects of kinds that Kubernetes does not serve and no CRD among them defines: %s. A cluster made here serves none of them: leave them out with the Operator file's spec.exclude (- kind: %s) and switch off what needs them (spec.env, spec.args), or run on a cluster that serves them (--kubeconfig)",
			joinUnserved(unserved), unserved[0].Kind)
	}
	hermetic, err := f.where(ctx, prog)
	if err != nil {
		return err
	}
	e, err := engine.Setup(ctx, engine.Options{
		Envtest: hermetic,
		Cluster: cluster.Options{NodeImage: f.nodeImage, ConfigFile: f.kindConfig, Keep: f.keep,
			Existing: f.kubeconfig != "", Kubeconfig: f.kubeconfig, HostAddress: f.proxyAddress, Log: prog},
		Chaos:         install.Options{ControllerImage: f.chaosController, DaemonImage: f.chaosDaemon, PauseImage: f.pause},
		ImagesReady:   f.imagesReady,
		Relay:         engine.RelayOptions{Always: f.proxyRelay, Image: f.relayImage},
		Proxy:         f.proxy,
		Set:           f.loaded,
		Overrides:     f.overrides,
		OperatorArgs:  f.operatorArgs,
		Artifacts:     ro.Artifacts,
		KeepOnFailure: f.keepOnFailure,
		Log:           prog,
	})
	if err != nil {
		return setupFailed(err, ro, stdout)
	}
	defer func() {
		prog.Phase("teardown")
		if terr := e.Teardown(); terr != nil {
			prog.Printf("teardown: %v", terr)
		}
		prog.Done()
	}()
	prog.Done()
	return act(ctx, e, ro, prog, stdout)
}

// runScenarios runs the selected scenarios and prints the summary.
func runScenarios(ctx context.Context, e *engine.Engine, ro engine.RunOptions, prog *progress, stdout io.Writer) error {
	prog.Phase(fmt.Sprintf("%d scenarios", len(ro.Only)))
	rep, err := e.RunAll(ctx, ro)
	prog.Done()
	if rep != nil {
		prog.Clear()
		_, _ = fmt.Fprintln(stdout, rep.Summary())
		_, _ = fmt.Fprintf(stdout, "report: %s\n", filepath.Join(ro.Artifacts, htmlreport.FileName))
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return errFailedRun
	}
	return nil
}

// envtestAssets finds kube-apiserver and etcd: the flag, else the
// checkout's bin/k8s/<version> that make envtest-bins builds.
func envtestAssets(dir string) (string, error) {
	if dir == "" {
		if root := repoRoot(); root != "" {
			matches, _ := filepath.Glob(filepath.Join(root, "bin", "k8s", "v*"))
			if len(matches) > 0 {
				dir = matches[len(matches)-1]
			}
		}
	}
	if dir == "" {
		return "", usagef("--envtest needs kube-apiserver and etcd: pass --envtest-assets or set KUBEBUILDER_ASSETS (in a Gauntlet checkout, make envtest-bins builds them)")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", usagef("--envtest-assets %s: no %s there", dir, b)
		}
	}
	return dir, nil
}

// where prepares where the run goes: envtest (its binaries found), or a
// cluster (the images it needs built, unless it is an existing one).
func (f *runFlags) where(ctx context.Context, prog *progress) (*engine.EnvtestOptions, error) {
	if f.envtest {
		assets, err := envtestAssets(f.envtestAssets)
		if err != nil {
			return nil, err
		}
		prog.Phase("envtest, the operator's process and the API proxy")
		return &engine.EnvtestOptions{Assets: assets}, nil
	}
	if f.kubeconfig == "" || f.pushTo != "" {
		if err := prepareImages(ctx, f, prog); err != nil {
			return nil, err
		}
	}
	if f.pushTo != "" {
		if err := pushImages(ctx, f, prog); err != nil {
			return nil, err
		}
	}
	prog.Phase("cluster, operator and Chaos Mesh")
	return nil, nil
}
