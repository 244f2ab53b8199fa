package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/install"
	suite "github.com/gauntlet-dev/gauntlet/suites/chaos"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
	"github.com/gauntlet-dev/gauntlet/suites/framework"
)

// runFlags are gauntlet run's flags (replay shares them).
type runFlags struct {
	scenarios                           []string
	seed                                int64
	budgets, report                     string
	kubeconfig                          string
	nodeImage, kindConfig               string
	keep, buildImages, verbose          bool
	operatorImage, etcdImage, etcdFrom  string
	chaosController, chaosDaemon, pause string
	timeout                             time.Duration
}

func (f *runFlags) register(cmd *cobra.Command, withSelection bool) {
	fs := cmd.Flags()
	if withSelection {
		fs.StringSliceVar(&f.scenarios, "scenario", nil, "scenarios to run, by name or glob such as 'partition-*' (repeat or comma-separate; default: all; see gauntlet list)")
		fs.Int64Var(&f.seed, "seed", -1, "seed for every choice of target and timing (default: from the clock, printed); replays a run")
		_ = cmd.RegisterFlagCompletionFunc("scenario", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return suite.Names(), cobra.ShellCompDirectiveNoFileComp
		})
	}
	fs.StringVar(&f.budgets, "budgets", "", "budget file (default: the built-in suites/chaos/budgets.yaml)")
	fs.StringVar(&f.report, "report", "", "folder for the report (default: artifacts/chaos-<UTC time>)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "run on this existing cluster instead of creating a kind cluster (its nodes must be able to pull the images)")
	fs.StringVar(&f.nodeImage, "node-image", e2e.Getenv("GAUNTLET_NODE_IMAGE", e2e.DefaultNodeImage), "kind node image (gauntlet.dev/* images are built offline when missing)")
	fs.StringVar(&f.kindConfig, "kind-config", e2e.Getenv("GAUNTLET_KIND_CONFIG", e2e.DefaultKindConfig), "kind cluster config")
	fs.BoolVar(&f.keep, "keep-cluster", false, "leave the kind cluster running and print how to reach it")
	fs.BoolVar(&f.verbose, "verbose", false, "also print client-go's own log (port-forwards broken by killed pods, retries)")
	fs.BoolVar(&f.buildImages, "build-images", true, "inside a Gauntlet checkout, build the images that are missing (make images chaos-images [node-image]); each is reused when present")
	fs.StringVar(&f.operatorImage, "operator-image", os.Getenv("OPERATOR_IMAGE"), "operator image (default: the one make images wrote to bin/images.env)")
	fs.StringVar(&f.etcdImage, "etcd-image", e2e.Getenv("ETCD_IMAGE", e2e.DefaultEtcdImage), "etcd image the clusters run")
	fs.StringVar(&f.etcdFrom, "etcd-upgrade-from", e2e.Getenv("ETCD_UPGRADE_FROM_IMAGE", e2e.DefaultEtcdUpgradeFrom), "older etcd image the upgrade scenario starts from")
	fs.StringVar(&f.chaosController, "chaos-controller-image", e2e.Getenv("CHAOS_CONTROLLER_IMAGE", install.DefaultControllerImage), "Chaos Mesh controller-manager image")
	fs.StringVar(&f.chaosDaemon, "chaos-daemon-image", e2e.Getenv("CHAOS_DAEMON_IMAGE", install.DefaultDaemonImage), "Chaos Mesh chaos-daemon image")
	fs.StringVar(&f.pause, "pause-image", install.DefaultPauseImage, "image pod-failure swaps in (must be on the nodes)")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Minute, "bound on the whole run")
	_ = cmd.MarkFlagFilename("budgets", "yaml", "yml")
	_ = cmd.MarkFlagFilename("kind-config", "yaml", "yml")
	_ = cmd.MarkFlagFilename("kubeconfig")
	_ = cmd.MarkFlagDirname("report")
}

// selectScenarios expands names and globs into scenario names, in the
// suite's order; an unknown one is an error that lists the valid choices.
func selectScenarios(patterns []string) ([]string, error) {
	all := suite.Names()
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

// validate checks every flag before anything is started.
func (f *runFlags) validate() error {
	if f.seed < -1 {
		return usagef("--seed %d: want a non-negative integer", f.seed)
	}
	if f.timeout <= 0 {
		return usagef("--timeout %s: want a positive duration", f.timeout)
	}
	if _, err := selectScenarios(f.scenarios); err != nil {
		return usageError{err}
	}
	if _, err := suite.LoadBudgets(f.budgets); err != nil {
		return usagef("--budgets: %w", err)
	}
	if f.kubeconfig != "" {
		if _, err := os.Stat(f.kubeconfig); err != nil {
			return usagef("--kubeconfig: %w", err)
		}
		if f.operatorImage == "" && repoRoot() == "" {
			return usagef("--operator-image is required with --kubeconfig outside a Gauntlet checkout")
		}
		return nil
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

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:     "run",
		Aliases: []string{"chaos"},
		Short:   "Run the chaos scenarios and write a report",
		Long: `run does everything from a bare machine: checks the Docker engine (starting one
in a Gauntlet checkout), builds the images that are missing, creates a kind
cluster (or uses --kubeconfig), deploys the operator and Chaos Mesh, runs
each scenario on a fresh cluster under load, and writes report.html,
report.json, summary.md and junit.xml. Each phase prints a progress line
with its duration; a long wait says what it is waiting for.`,
		Example: `  gauntlet run
  gauntlet run --scenario leader-pod-kill --scenario 'partition-*' --seed 7
  gauntlet run --kubeconfig ~/.kube/config --operator-image registry.example/op:v1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return runChaos(cmd.Context(), f, nil, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, true)
	return cmd
}

// runChaos makes the run: engine and images, cluster, operator, Chaos
// Mesh, the scenarios, the report. seeds pins recorded seeds (replay).
func runChaos(ctx context.Context, f *runFlags, seeds map[string]uint64, stdout, stderr io.Writer) error {
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

	names, err := selectScenarios(f.scenarios)
	if err != nil {
		return usageError{err}
	}
	ro := suite.RunOptions{Seed: uint64(time.Now().UnixNano() % 1_000_000), Seeds: seeds,
		Match: regexp.MustCompile("^(" + strings.Join(quoteAll(names), "|") + ")$")}
	if f.seed >= 0 {
		ro.Seed = uint64(f.seed)
	}
	if ro.Budgets, err = suite.LoadBudgets(f.budgets); err != nil {
		return usagef("--budgets: %w", err)
	}
	ro.Artifacts = f.report
	if ro.Artifacts == "" {
		ro.Artifacts = filepath.Join(framework.ArtifactsDir(), "chaos-"+time.Now().UTC().Format("20060102-150405"))
	}
	prog.Printf("seed %d (replay with --seed %d); %d scenarios; report in %s", ro.Seed, ro.Seed, len(names), ro.Artifacts)

	if err := prepareImages(ctx, f, prog); err != nil {
		return err
	}
	o := suite.Options{
		E2E: e2e.Options{
			Cluster: framework.ClusterOptions{NodeImage: f.nodeImage, ConfigFile: f.kindConfig, Keep: f.keep,
				Existing: f.kubeconfig != "", Kubeconfig: f.kubeconfig, Log: prog},
			OperatorImage: f.operatorImage, EtcdImage: f.etcdImage, EtcdUpgradeFrom: f.etcdFrom, Log: prog,
		},
		Chaos: install.Options{ControllerImage: f.chaosController, DaemonImage: f.chaosDaemon, PauseImage: f.pause},
	}
	prog.Phase("cluster, operator and Chaos Mesh")
	env, err := suite.Setup(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		prog.Phase("teardown")
		if terr := env.Teardown(); terr != nil {
			prog.Printf("teardown: %v", terr)
		}
		prog.Done()
	}()
	prog.Done()
	prog.Phase(fmt.Sprintf("%d scenarios", len(names)))
	rep, err := env.RunAll(ctx, ro)
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

func quoteAll(names []string) []string {
	out := slices.Clone(names)
	for i, n := range out {
		out[i] = regexp.QuoteMeta(n)
	}
	return out
}
