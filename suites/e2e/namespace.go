package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// NewNamespace creates a namespace for one spec, labelled for the
// restricted Pod Security Standard like the operator's, and deletes it
// (and waits) when the test ends; a failed test leaves a bundle first.
func (e *Env) NewNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := framework.NewNamespace(t, e.Client, prefix)
	nsObj := &corev1.Namespace{}
	NewWithT(t).Expect(e.Client.Get(t.Context(), client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	nsObj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}
	NewWithT(t).Expect(e.Client.Update(t.Context(), nsObj)).To(Succeed())
	t.Cleanup(func() {
		framework.DeleteAllAndWait(t, e.Client, ns, &dbv1.DatabaseCluster{}, &dbv1.DatabaseClusterList{})
	})
	framework.BundleOnFailure(t, "e2e", func() framework.BundleOptions {
		return framework.BundleOptions{
			Config: e.Config, Namespaces: []string{ns, OperatorNamespace}, Logs: e.Cluster.BundleLogs(),
			Files: map[string]func(context.Context) (string, error){
				"metrics.txt":      e.metricsText,
				"etcd-members.txt": func(ctx context.Context) (string, error) { return e.describeMembers(ctx, ns) },
			},
		}
	})
	return ns
}

func (e *Env) describeMembers(ctx context.Context, ns string) (string, error) {
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "etcd"}); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range pods.Items {
		cli, done, err := e.Member(ctx, ns, p.Name)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p.Name, err)
			continue
		}
		list, lerr := cli.MemberList(ctx)
		st, serr := cli.Status(ctx, cli.Endpoints()[0])
		done()
		fmt.Fprintf(&b, "== %s\nmember list: %v %v\nendpoint status: %+v %v\n", p.Name, list, lerr, st, serr)
	}
	return b.String(), nil
}

func (e *Env) metricsText(ctx context.Context) (string, error) {
	fams, err := e.ScrapeOperator(ctx)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %v\n", n, fams[n].GetMetric())
	}
	return b.String(), nil
}
