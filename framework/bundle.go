package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// BundleOptions say what a failure bundle holds.
type BundleOptions struct {
	// Config reaches the cluster.
	Config *rest.Config
	// Namespaces whose objects, events and pod logs are collected (the
	// test's, and the operator's).
	Namespaces []string
	// Files are extra files, each produced by a function: a metrics
	// snapshot, etcd's member list and endpoint status, and so on. A
	// function's error is written into the file instead.
	Files map[string]func(ctx context.Context) (string, error)
	// Logs, if set, also exports the cluster's own logs into dir (kind's
	// node logs: cluster.Cluster.ExportLogs).
	Logs func(dir string) error
}

// CollectBundle writes everything a failed test leaves to look at under
// dir: per namespace, every object as YAML (objects/<resource>/<name>.yaml),
// events in time order (events.txt), and each container's log and its
// previous container's log (logs/<pod>/<container>[.previous].log); then the
// extra files and kind's logs. What cannot be collected is listed in
// errors.txt; collection itself never fails the test twice.
func CollectBundle(ctx context.Context, dir string, o BundleOptions) error {
	var problems []string
	note := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(o.Config)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return err
	}
	resources, err := namespacedResources(cs.Discovery())
	if err != nil {
		note("discovery: %v", err)
	}
	for _, ns := range o.Namespaces {
		nsDir := filepath.Join(dir, ns)
		collectObjects(ctx, dyn, resources, ns, nsDir, note)
		write(filepath.Join(nsDir, "events.txt"), events(ctx, cs, ns, note), note)
		collectLogs(ctx, cs, ns, nsDir, note)
	}
	names := make([]string, 0, len(o.Files))
	for name := range o.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		content, err := o.Files[name](ctx)
		if err != nil {
			content = fmt.Sprintf("could not collect %s: %v\n", name, err)
		}
		write(filepath.Join(dir, name), content, note)
	}
	if o.Logs != nil {
		if err := o.Logs(filepath.Join(dir, "kind")); err != nil {
			note("%v", err)
		}
	}
	if len(problems) > 0 {
		write(filepath.Join(dir, "errors.txt"), strings.Join(problems, "\n")+"\n", func(string, ...any) {})
	}
	return nil
}

// collectObjects writes every object of the namespace, of the given
// resources, as YAML under nsDir/objects/<resource>/<name>.yaml.
func collectObjects(ctx context.Context, dyn dynamic.Interface, resources []schema.GroupVersionResource, ns, nsDir string, note func(string, ...any)) {
	for _, gvr := range resources {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // some resources cannot be listed; not worth a line each
		}
		for _, item := range list.Items {
			item.SetManagedFields(nil)
			data, err := yaml.Marshal(item.Object)
			if err != nil {
				note("%s %s/%s: %v", gvr.Resource, ns, item.GetName(), err)
				continue
			}
			write(filepath.Join(nsDir, "objects", resourceDir(gvr), item.GetName()+".yaml"), string(data), note)
		}
	}
}

// collectLogs writes each container's log of every pod of the namespace,
// and its previous container's log when it restarted, under
// nsDir/logs/<pod>/<container>[.previous].log.
func collectLogs(ctx context.Context, cs kubernetes.Interface, ns, nsDir string, note func(string, ...any)) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		note("listing pods in %s: %v", ns, err)
		return
	}
	for _, p := range pods.Items {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			for _, previous := range []bool{false, true} {
				name := c.Name + ".log"
				if previous {
					name = c.Name + ".previous.log"
					if !restarted(p, c.Name) {
						continue
					}
				}
				log, err := podLog(ctx, cs, ns, p.Name, c.Name, previous)
				if err != nil {
					note("log of %s/%s %s (previous=%v): %v", ns, p.Name, c.Name, previous, err)
					continue
				}
				write(filepath.Join(nsDir, "logs", p.Name, name), log, note)
			}
		}
	}
}

// BundleOnFailure collects a bundle into <artifacts>/<run>/<test name>/
// when the test has failed by the time its cleanups run. artifacts is
// $ARTIFACTS when set (make sets it), else ./artifacts.
func BundleOnFailure(t testing.TB, run string, o func() BundleOptions) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir := filepath.Join(ArtifactsDir(), run, safeName(t.Name()))
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
		defer cancel()
		if err := CollectBundle(ctx, dir, o()); err != nil {
			t.Logf("collecting the failure bundle: %v", err)
			return
		}
		t.Logf("failure bundle: %s", dir)
	})
}

// ArtifactsDir is where runs leave their evidence: $ARTIFACTS when set
// (make sets it), else ./artifacts.
func ArtifactsDir() string {
	if root := os.Getenv("ARTIFACTS"); root != "" {
		return root
	}
	return "artifacts"
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return unsafe.ReplaceAllString(s, "_") }

func resourceDir(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}

func write(path, content string, note func(string, ...any)) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		note("%v", err)
		return
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		note("%v", err)
	}
}

// namespacedResources lists every namespaced resource that can be listed,
// at its preferred version, skipping subresources and events (written
// separately).
func namespacedResources(d discovery.DiscoveryInterface) ([]schema.GroupVersionResource, error) {
	lists, err := d.ServerPreferredNamespacedResources()
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || r.Name == "events" || !hasVerb(r.Verbs, "list") {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out, err
}

func hasVerb(verbs metav1.Verbs, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

func events(ctx context.Context, cs kubernetes.Interface, ns string, note func(string, ...any)) string {
	list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		note("listing events in %s: %v", ns, err)
		return ""
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		return eventTime(list.Items[i].EventTime.Time, list.Items[i].DeprecatedLastTimestamp.Time).Before(
			eventTime(list.Items[j].EventTime.Time, list.Items[j].DeprecatedLastTimestamp.Time))
	})
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "%s %s %s %s/%s %s: %s\n",
			eventTime(e.EventTime.Time, e.DeprecatedLastTimestamp.Time).UTC().Format(time.RFC3339),
			e.Type, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Action, e.Note)
	}
	return b.String()
}

func eventTime(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	return a
}

func restarted(p corev1.Pod, container string) bool {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.Name == container {
			return s.RestartCount > 0
		}
	}
	return false
}

func podLog(ctx context.Context, cs kubernetes.Interface, ns, pod, container string, previous bool) (string, error) {
	rc, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(io.LimitReader(rc, 16<<20))
	if err != nil && !errors.Is(err, io.EOF) {
		return string(data), err
	}
	return string(data), nil
}
