//go:build e2e

// Package operatorupgrade upgrades the operator itself on kind: a release
// without v1beta1 runs a cluster, the operator under test is deployed over
// it. It has its own cluster (make test-e2e-operator-upgrade), since it
// starts from another operator than the e2e tier's.
package operatorupgrade

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gauntlet-dev/gauntlet/suites/e2e"
)

var (
	env *e2e.Env
	// upgradeTo is the operator image under test (OPERATOR_IMAGE).
	upgradeTo string
)

// TestMain brings up kind with the release named by OPERATOR_RELEASE_IMAGE
// and OPERATOR_RELEASE_MANIFESTS (make test-e2e-operator-upgrade builds it
// with tools/images/operator-release.sh).
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	o := e2e.OptionsFromEnv()
	image, manifests := os.Getenv("OPERATOR_RELEASE_IMAGE"), os.Getenv("OPERATOR_RELEASE_MANIFESTS")
	if image == "" || manifests == "" || o.OperatorImage == "" {
		fmt.Fprintln(os.Stderr, "OPERATOR_IMAGE, OPERATOR_RELEASE_IMAGE and OPERATOR_RELEASE_MANIFESTS must be set: run make test-e2e-operator-upgrade")
		return 1
	}
	upgradeTo = o.OperatorImage
	o.OperatorImage, o.Manifests = image, manifests
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) //nolint:forbidigo // TestMain has no *testing.T; this context bounds the setup
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, o)
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

func TestOperatorUpgrade(t *testing.T) {
	in := e2e.SpecInput{Env: env, Namespace: env.NewNamespace(t, "operator-upgrade-")}
	e2e.OperatorUpgradeSpec(t.Context(), t, in, upgradeTo, "")
	e2e.ExpectOperatorHealthy(t.Context(), t, env)
}
