// Command gauntlet runs Gauntlet's chaos tier outside `go test`: against a
// kind cluster it creates (from the images `make images node-image
// chaos-images` built) or any cluster by kubeconfig, and writes a report
// (report.json, junit.xml, summary.md, and a folder of evidence per failed
// scenario).
//
//	gauntlet chaos [flags]        run the scenarios
//	gauntlet chaos --list         list them with what each checks
//
// Exit status: 0 when every scenario passed or was skipped for a stated
// reason, 1 when one failed, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/chaos/install"
	suite "github.com/gauntlet-dev/gauntlet/suites/chaos"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
	"github.com/gauntlet-dev/gauntlet/suites/framework"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is bad input: reported with the usage, exit status 2.
type usageError struct{ error }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "chaos" {
		_, _ = fmt.Fprintln(stderr, "usage: gauntlet chaos [flags] (gauntlet chaos -h for the flags)")
		return 2
	}
	err := chaosCmd(args[1:], stdout, stderr)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		_, _ = fmt.Fprintf(stderr, "gauntlet chaos: %v\n", err)
		return 2
	default:
		_, _ = fmt.Fprintf(stderr, "gauntlet chaos: %v\n", err)
		return 1
	}
}

type chaosFlags struct {
	list                                bool
	seed                                int64
	scenarios, budgets, report          string
	kubeconfig                          string
	nodeImage, kindConfig               string
	keep                                bool
	operatorImage, etcdImage, etcdFrom  string
	chaosController, chaosDaemon, pause string
	timeout                             time.Duration
}

func parseChaosFlags(args []string, stderr io.Writer) (*chaosFlags, error) {
	f := &chaosFlags{}
	fs := flag.NewFlagSet("gauntlet chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.list, "list", false, "list the scenarios and exit")
	fs.Int64Var(&f.seed, "seed", -1, "seed for every choice of target and timing (default: from the clock, printed); replays a run")
	fs.StringVar(&f.scenarios, "scenarios", "", "regexp selecting scenarios by name (default: all)")
	fs.StringVar(&f.budgets, "budgets", "", "budget file (default: the built-in suites/chaos/budgets.yaml)")
	fs.StringVar(&f.report, "report", "", "folder for the report (default: artifacts/chaos-<UTC time>)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "run on this existing cluster instead of creating a kind cluster (images must be pullable there)")
	fs.StringVar(&f.nodeImage, "node-image", e2e.DefaultNodeImage, "kind node image")
	fs.StringVar(&f.kindConfig, "kind-config", e2e.DefaultKindConfig, "kind cluster config")
	fs.BoolVar(&f.keep, "keep-cluster", false, "leave the kind cluster running")
	fs.StringVar(&f.operatorImage, "operator-image", os.Getenv("OPERATOR_IMAGE"), "operator image (make images writes it to bin/images.env)")
	fs.StringVar(&f.etcdImage, "etcd-image", e2e.DefaultEtcdImage, "etcd image the clusters run")
	fs.StringVar(&f.etcdFrom, "etcd-upgrade-from", e2e.DefaultEtcdUpgradeFrom, "older etcd image the upgrade scenario starts from")
	fs.StringVar(&f.chaosController, "chaos-controller-image", install.DefaultControllerImage, "Chaos Mesh controller-manager image")
	fs.StringVar(&f.chaosDaemon, "chaos-daemon-image", install.DefaultDaemonImage, "Chaos Mesh chaos-daemon image")
	fs.StringVar(&f.pause, "pause-image", install.DefaultPauseImage, "image pod-failure swaps in (must be on the nodes)")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %v", fs.Args())}
	}
	if f.list {
		return f, nil
	}
	if f.seed < -1 {
		return nil, usageError{fmt.Errorf("--seed %d: want a non-negative integer", f.seed)}
	}
	if f.operatorImage == "" {
		return nil, usageError{errors.New("--operator-image is required (or OPERATOR_IMAGE; make images writes it to bin/images.env)")}
	}
	if f.timeout <= 0 {
		return nil, usageError{fmt.Errorf("--timeout %s: want a positive duration", f.timeout)}
	}
	if f.kubeconfig != "" {
		if _, err := os.Stat(f.kubeconfig); err != nil {
			return nil, usageError{fmt.Errorf("--kubeconfig: %w", err)}
		}
	} else {
		if _, err := os.Stat(f.kindConfig); err != nil && !filepath.IsAbs(f.kindConfig) {
			// A path relative to the repository, from anywhere in it.
			f.kindConfig = framework.CRDPath(f.kindConfig)
		}
		if _, err := os.Stat(f.kindConfig); err != nil {
			return nil, usageError{fmt.Errorf("--kind-config: %w", err)}
		}
	}
	return f, nil
}

func chaosCmd(args []string, stdout, stderr io.Writer) error {
	f, err := parseChaosFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.list {
		for _, s := range suite.Scenarios {
			_, _ = fmt.Fprintf(stdout, "%-50s %s\n", s.Name, s.Describe)
		}
		return nil
	}
	ro := suite.RunOptions{Seed: uint64(time.Now().UnixNano() % 1_000_000)}
	if f.seed >= 0 {
		ro.Seed = uint64(f.seed)
	}
	if f.scenarios != "" {
		if ro.Match, err = regexp.Compile(f.scenarios); err != nil {
			return usageError{fmt.Errorf("--scenarios: %w", err)}
		}
		if !matchesAny(ro.Match) {
			return usageError{fmt.Errorf("--scenarios %q matches no scenario (see --list)", f.scenarios)}
		}
	}
	if ro.Budgets, err = suite.LoadBudgets(f.budgets); err != nil {
		return usageError{fmt.Errorf("--budgets: %w", err)}
	}
	ro.Artifacts = f.report
	if ro.Artifacts == "" {
		ro.Artifacts = filepath.Join(framework.ArtifactsDir(), "chaos-"+time.Now().UTC().Format("20060102-150405"))
	}

	ctrl.SetLogger(zap.New(zap.WriteTo(stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	o := suite.Options{
		E2E: e2e.Options{
			Cluster: framework.ClusterOptions{NodeImage: f.nodeImage, ConfigFile: f.kindConfig, Keep: f.keep,
				Existing: f.kubeconfig != "", Kubeconfig: f.kubeconfig, Log: stderr},
			OperatorImage: f.operatorImage, EtcdImage: f.etcdImage, EtcdUpgradeFrom: f.etcdFrom, Log: stderr,
		},
		Chaos: install.Options{ControllerImage: f.chaosController, DaemonImage: f.chaosDaemon, PauseImage: f.pause},
	}
	_, _ = fmt.Fprintf(stderr, "gauntlet chaos: seed %d (replay with --seed %d); report in %s\n", ro.Seed, ro.Seed, ro.Artifacts)
	env, err := suite.Setup(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if terr := env.Teardown(); terr != nil {
			_, _ = fmt.Fprintf(stderr, "gauntlet chaos: teardown: %v\n", terr)
		}
	}()
	rep, err := env.RunAll(ctx, ro)
	if rep != nil {
		_, _ = fmt.Fprintln(stdout, rep.Summary())
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return fmt.Errorf("a scenario failed: see %s", filepath.Join(ro.Artifacts, "summary.md"))
	}
	return nil
}

func matchesAny(re *regexp.Regexp) bool {
	for _, n := range suite.Names() {
		if re.MatchString(n) {
			return true
		}
	}
	return false
}
