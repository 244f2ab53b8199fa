package engine

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// metricsReader names the ServiceAccount, ClusterRole and binding the
// harness scrapes a secure metrics endpoint as.
const metricsReader = "gauntlet-metrics-reader"

// metricsAccess is how the harness reaches the operator's metrics.
type metricsAccess struct {
	client *http.Client
	token  string
}

func metricsPath(m *scenario.Metrics) string {
	if m.Path == "" {
		return "/metrics"
	}
	return m.Path
}

// grantMetrics prepares the scrapes. A secure endpoint (HTTPS behind
// authentication and authorization, kubebuilder's default) gets a
// ServiceAccount of the harness's own in the operator's namespace,
// allowed to get the metrics path as kubebuilder's metrics-reader role
// allows it, and the scrapes present a token of it. The serving
// certificate is the operator's own, self-signed unless it was given
// one: it is not verified (the harness dials the pod it port-forwarded
// to, or the process it started).
func (e *Engine) grantMetrics(ctx context.Context) error {
	m := e.operator.Metrics
	e.metrics = metricsAccess{client: http.DefaultClient}
	if m == nil || !m.Secure {
		return nil
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	ns := e.operator.Namespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: metricsReader}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{metricsPath(m)}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: metricsReader}}}
	_, err1 := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	_, err2 := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	_, err3 := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	for _, err := range []error{err1, err2, err3} {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("granting the harness the operator's secure metrics: %w", err)
		}
	}
	token, err := e.serviceAccountToken(ctx, client.ObjectKeyFromObject(sa))
	if err != nil {
		return err
	}
	e.metrics = metricsAccess{token: token, client: &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's own self-signed certificate; see above
	}}}
	e.logf("scraping the operator's secure metrics as ServiceAccount %s/%s, allowed to get %s", ns, metricsReader, metricsPath(m))
	return nil
}

// scrapeAt reads the operator's metrics at host:port, and says what a
// failure likely means.
func (e *Engine) scrapeAt(ctx context.Context, hostPort string) (map[string]*dto.MetricFamily, error) {
	m := e.operator.Metrics
	scheme := "http"
	if m.Secure {
		scheme = "https"
	}
	fams, err := framework.ScrapeWith(ctx, scheme+"://"+hostPort+metricsPath(m), framework.ScrapeOptions{Client: e.metrics.client, BearerToken: e.metrics.token})
	if err == nil {
		return fams, nil
	}
	msg := err.Error()
	switch {
	case !m.Secure && strings.Contains(msg, "HTTPS server"):
		return nil, fmt.Errorf("%w (the endpoint speaks HTTPS: set spec.metrics.secure: true)", err)
	case m.Secure && strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return nil, fmt.Errorf("%w (the endpoint speaks plain HTTP: leave out spec.metrics.secure)", err)
	case m.Secure && (strings.Contains(msg, "HTTP 401") || strings.Contains(msg, "HTTP 403")):
		return nil, fmt.Errorf("%w (the endpoint refused the token of %s/%s, which may get %s: the operator must be allowed to create TokenReviews and SubjectAccessReviews)",
			err, e.operator.Namespace, metricsReader, metricsPath(m))
	}
	return nil, err
}

// scrapeOperator reads the operator's metrics, every pod's series put
// together (scrapeEach): a sum counts every replica (with leader
// election, a standby has none of the controller's work, and which pod
// leads may change during a run).
func (r *run) scrapeOperator(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	each, err := r.scrapeEach(ctx)
	if err != nil {
		return nil, err
	}
	return mergeEach(each), nil
}

// mergeEach puts every pod's series together, in the order of their UIDs.
func mergeEach(each map[string]map[string]*dto.MetricFamily) map[string]*dto.MetricFamily {
	var all map[string]*dto.MetricFamily
	for _, uid := range slices.Sorted(maps.Keys(each)) {
		all = framework.MergeFamilies(all, each[uid])
	}
	return all
}

// scrapeEach reads the operator's metrics by pod UID: the process's on
// envtest (as "process"); on a cluster every ready operator pod's (every
// running one's when none is ready). A pod scraped that does not answer
// fails the scrape: a sum without it could hide a rise. One that is
// running but not ready yet (just restarted) may not serve its metrics
// yet, and has done no work since it started.
func (r *run) scrapeEach(ctx context.Context) (map[string]map[string]*dto.MetricFamily, error) {
	m := r.e.operator.Metrics
	if h := r.e.host; h != nil {
		fams, err := r.e.scrapeAt(ctx, h.MetricsAddress())
		if err != nil {
			return nil, err
		}
		return map[string]map[string]*dto.MetricFamily{processKey: fams}, nil
	}
	pods, err := r.e.operatorPods(ctx)
	if err != nil {
		return nil, err
	}
	each := map[string]map[string]*dto.MetricFamily{}
	for _, p := range scrapedPods(pods) {
		fams, err := func() (map[string]*dto.MetricFamily, error) {
			pf, err := framework.ForwardPort(ctx, r.e.Config, p.Namespace, p.Name, int(m.Port))
			if err != nil {
				return nil, err
			}
			defer pf.Close()
			return r.e.scrapeAt(ctx, fmt.Sprintf("127.0.0.1:%d", pf.Local))
		}()
		if err != nil {
			return nil, fmt.Errorf("operator pod %s: %w", p.Name, err)
		}
		each[string(p.UID)] = fams
	}
	if len(each) == 0 {
		return nil, fmt.Errorf("no running operator pod in %s", r.e.operator.Namespace)
	}
	return each, nil
}

// scrapedPods are the ready pods of pods, or the running ones when none
// is ready.
func scrapedPods(pods []corev1.Pod) []corev1.Pod {
	var ready, running []corev1.Pod
	for _, p := range pods {
		switch {
		case p.Status.Phase != corev1.PodRunning:
		case framework.PodReady(&p):
			ready = append(ready, p)
		default:
			running = append(running, p)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return running
}
