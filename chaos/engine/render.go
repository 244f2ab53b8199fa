package engine

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/cluster"
	"github.com/gauntlet-dev/gauntlet/cluster/pki"
)

// renderOperator reads the operator's manifests, variables expanded, and
// stands in for cert-manager (cluster.StandInForCertManager) where the
// cluster does not serve it.
func (e *Engine) renderOperator() ([]*unstructured.Unstructured, error) {
	objs, err := render.Operator(e.o.Set.OperatorFile, e.operator, e.opVars)
	if err != nil || e.servesCertManager() {
		return objs, err
	}
	ca, err := pki.NewCA("gauntlet-cert-manager-stand-in", time.Now(), standInValidity)
	if err != nil {
		return nil, err
	}
	objs, did, err := cluster.StandInForCertManager(objs, ca, e.operator.Namespace)
	if err != nil {
		return nil, fmt.Errorf("standing in for cert-manager: %w", err)
	}
	for _, d := range did {
		e.logf("no cert-manager here: %s", d)
	}
	return objs, nil
}

// standInValidity is how long the certificates issued in cert-manager's
// stead are valid: longer than any run.
const standInValidity = 30 * 24 * time.Hour

// servesCertManager says whether the cluster serves cert-manager's
// Certificates: an existing cluster may; one made here (kind, envtest)
// does not.
func (e *Engine) servesCertManager() bool {
	if e.Cluster == nil || !e.Cluster.Existing {
		return false
	}
	_, err := e.Mapper.RESTMapping(schema.GroupKind{Group: cluster.CertManagerGroup, Kind: "Certificate"})
	return err == nil
}
