//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	harness "github.com/kudobuilder/kuttl/pkg/apis/testharness/v1beta1"
	kuttl "github.com/kudobuilder/kuttl/pkg/test"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
)

var env *e2e.Env

// TestMain brings the cluster up once for the package: kind (or the cluster
// of KUBECONFIG with GAUNTLET_EXISTING_CLUSTER=1), the images, the operator.
// make test-e2e sets the image names.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	level := zapcore.ErrorLevel
	if os.Getenv("GAUNTLET_VERBOSE") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) //nolint:forbidigo // TestMain has no *testing.T; this context bounds the setup
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.OptionsFromEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		return 1
	}
	code := m.Run()
	if err := env.Teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e teardown:", err)
		code = 1
	}
	return code
}

func input(t *testing.T, prefix string) e2e.SpecInput {
	return e2e.SpecInput{Env: env, Namespace: env.NewNamespace(t, prefix)}
}

func TestCreate(t *testing.T) {
	in := input(t, "create-")
	c := e2e.CreateSpec(t.Context(), t, in)
	e2e.ExpectStable(t.Context(), t, in, c)
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}

func TestScale(t *testing.T) {
	e2e.ScaleSpec(t.Context(), t, input(t, "scale-"))
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}

func TestUpgrade(t *testing.T) {
	e2e.UpgradeSpec(t.Context(), t, input(t, "upgrade-"))
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}

func TestMemberLoss(t *testing.T) {
	e2e.MemberLossSpec(t.Context(), t, input(t, "loss-"))
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}

func TestSnapshot(t *testing.T) {
	e2e.SnapshotSpec(t.Context(), t, input(t, "snapshot-"))
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}

// TestKuttl runs the declarative suites under suites/e2e/kuttl through
// kuttl's Go harness against the same cluster: one namespace per test case.
func TestKuttl(t *testing.T) {
	dir := framework.CRDPath("suites/e2e/kuttl")
	t.Chdir(t.TempDir()) // kuttl writes a kubeconfig file into the working directory
	h := kuttl.Harness{
		T: t,
		TestSuite: harness.TestSuite{
			TestDirs: []string{dir},
			Timeout:  300,
			Parallel: 1,
			Config:   &harness.RestConfig{RC: env.Config},
		},
	}
	h.Run()
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}

func TestBackup(t *testing.T) {
	e2e.BackupSpec(t.Context(), t, input(t, "backup-"))
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}

func TestBackupToBucket(t *testing.T) {
	e2e.BackupToBucketSpec(t.Context(), t, input(t, "bucket-"))
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}
