package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/compare"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/cluster/podstate"
	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
)

// firstConverged waits for the new resource to converge. On a cluster,
// unless the scenario allows unready pods, the namespace's pods are
// watched meanwhile: one that will not start (a crash
// loop, an image that is not there, a volume that does not mount) ends the
// wait with its evidence. After a fault such states are the fault's doing,
// and waitConverged alone waits them out.
func (r *run) firstConverged(ctx context.Context) error {
	// Nothing the operator has done yet can make every pod ready (there
	// are none) or a converged expression such as "true" hold: the first
	// convergence waits for a sign that it acted.
	r.awaitActed = true
	defer func() { r.awaitActed = false }()
	// allPodsReady: false says some pods may stay unready (a backup Job's
	// retries): their states are the scenario's, not a setup failure.
	if all := r.s.Spec.Resource.AllPodsReady; r.e.host == nil && (all == nil || *all) {
		guard, err := r.e.podGuard(r.ns, nil, "the pods of "+r.obj.GetKind()+" "+r.obj.GetName())
		if err != nil {
			return err
		}
		r.podGuard = guard
		defer func() { r.podGuard = nil }()
	}
	err := r.waitConverged(ctx)
	stuck := (*podstate.StuckError)(nil)
	if !errors.As(err, &stuck) {
		return err
	}
	r.res.NoRoom = stuck.NoRoom()
	if r.res.Artifacts != "" {
		path := filepath.Join(r.res.Artifacts, "pods-not-starting.txt")
		if os.MkdirAll(r.res.Artifacts, 0o755) == nil && os.WriteFile(path, []byte(stuck.Evidence), 0o644) == nil {
			return fmt.Errorf("%w\n(their state, log tails and events: %s)", err, path)
		}
	}
	return err
}

// DefaultConvergeWithin bounds each wait for convergence when a scenario
// gives no convergeWithin: a 5-member StatefulSet pulling its image on a
// cold kind node fits in it, a resource that will never converge is
// reported before a CI job's patience ends.
const DefaultConvergeWithin = 5 * time.Minute

// convergeWithin is the scenario's bound on a wait for convergence.
func (r *run) convergeWithin() time.Duration {
	if d := r.s.Spec.Resource.ConvergeWithin.Duration; d > 0 {
		return d
	}
	return DefaultConvergeWithin
}

// How long a convergence waits for the operator to see the harness's
// last write to the resource and to fall quiet after it, before the
// converged expressions are judged: a status that says "done" from before
// the change would otherwise pass at once, and the next step (or the end
// state) would be read before the operator acted on this one. Quiet is a
// second without a write through the proxy, less than the two seconds
// between a leader election's renewals; ten seconds bound an operator
// that never falls quiet, after which convergence is judged anyway.
const (
	observeWithin = 10 * time.Second
	quietFor      = time.Second
)

// awaitObserved waits, where the operator's client goes through the API
// proxy, until a watch of the operator has delivered the resource at the
// version the harness last wrote (or later) and the operator has made no
// write in the resource's namespace for quietFor (its leader election's
// renewals, elsewhere, are not its reaction). An operator whose watch the proxy cannot read
// (protobuf) is not waited for.
func (r *run) awaitObserved(ctx context.Context) {
	v := r.e.view
	if v == nil || r.wroteRV == "" {
		return
	}
	err := framework.PollFor(ctx, "the operator to see "+r.obj.GetKind()+" "+r.obj.GetName()+" at resourceVersion "+r.wroteRV, observeWithin, 100*time.Millisecond,
		func(context.Context) (bool, string, error) {
			seen, why := v.Proxy.Seen(apiproxy.Info{Resource: r.gvr.Resource, Namespace: r.ns, Name: r.obj.GetName()}, r.wroteRV, quietFor, apiproxy.NotState...)
			return seen, why, nil
		})
	if err != nil && ctx.Err() == nil {
		r.e.logf("%s: %v; judging convergence anyway", r.s.Metadata.Name, err)
	}
}

// waitConverged waits until every converged expression holds.
func (r *run) waitConverged(ctx context.Context) error {
	progs, err := compile(r.s.Spec.Resource.Converged)
	if err != nil {
		return err
	}
	within := r.convergeWithin()
	guard := r.podGuard
	if guard == nil && r.e.host == nil {
		// After a fault or a change only an image that cannot be pulled
		// is sure not to pass by waiting (firstConverged watches for
		// more).
		if guard, err = r.e.podGuard(r.ns, nil, "the pods of "+r.obj.GetKind()+" "+r.obj.GetName()); err != nil {
			return err
		}
		guard.ImagesOnly = true
	}
	r.awaitObserved(ctx)
	// last is what the resource showed last: a failed look at the events
	// as the wait runs out must not hide it.
	var last string
	start := time.Now()
	err = framework.PollFor(ctx, r.obj.GetName()+" to converge", within, time.Second, func(ctx context.Context) (bool, string, error) {
		if guard != nil {
			if err := guard.Check(ctx); err != nil {
				return false, "", err // a pod that will not start: no use waiting
			}
		}
		switch refused, err := r.admissionRefusal(ctx); {
		case err != nil && last != "":
			return false, last, nil
		case err != nil:
			return false, err.Error(), nil
		case refused != "":
			return false, "", errors.New(refused)
		}
		u, err := r.resource().Get(ctx, r.obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		r.obj = u
		for i, p := range progs {
			ok, err := p.eval(u.Object)
			if err != nil || !ok {
				last = unmet(i, p.src, err, statusOf(u))
				if cond := r.refusedIn(u); cond != "" {
					return false, "", fmt.Errorf("not converged: the operator refused the spec in its %s", cond)
				}
				return false, last, nil
			}
		}
		if r.awaitActed {
			if settled, why, err := r.operatorSettled(ctx, u); !settled || err != nil {
				last = why
				return false, why, err
			}
			r.awaitActed = false
		}
		if all := r.s.Spec.Resource.AllPodsReady; all != nil && !*all {
			return true, "", nil
		}
		ready, why, err := r.podsReady(ctx)
		switch {
		case err != nil:
			return false, err.Error(), nil // a failed look: keep the last state seen
		case !ready:
			last = why
		}
		return ready, why, nil
	})
	if err == nil {
		r.e.slowest(&r.e.slowestConverge, time.Since(start))
	}
	if stuck := (*podstate.StuckError)(nil); errors.As(err, &stuck) {
		r.res.Unpullable = stuck.Unpullable()
	}
	if err != nil && last != "" {
		r.contradictions(ctx)
	}
	return err
}

// actedOn are the kinds an operator makes for a resource, pods among
// them (an operator may run its members as bare pods).
var actedOn = append(slices.Clone(compare.ChildResources), schema.GroupVersionResource{Version: "v1", Resource: "pods"})

// operatorSettled says whether the operator has acted on the new
// resource u and what it owns has settled, else why the wait goes on.
func (r *run) operatorSettled(ctx context.Context, u *unstructured.Unstructured) (settled bool, why string, err error) {
	owned, acted, err := r.operatorActed(ctx)
	switch {
	case err != nil:
		return false, err.Error(), nil
	case !acted:
		return false, fmt.Sprintf("the operator has not acted on %s %s: it is as created (resourceVersion %s), and nothing in %s names it as owner", u.GetKind(), u.GetName(), r.createdRV, r.ns), nil
	}
	// A scenario whose converged expressions read the status trusts the
	// operator to say there when it is done, and they hold.
	if r.statusSpeaks(u) {
		return true, "", nil
	}
	// Its first sign may be the first object of a pass that makes the
	// others (the StatefulSet whose pods are waited for) a moment later:
	// judge once what it owns has stayed the same for actedQuiet.
	if key := strings.Join(owned, " "); key != r.acted.owned || r.acted.since.IsZero() {
		r.acted.owned, r.acted.since = key, time.Now()
	}
	if time.Since(r.acted.since) < actedQuiet {
		return false, fmt.Sprintf("the operator is acting on %s %s (it owns %d objects)", u.GetKind(), u.GetName(), len(owned)), nil
	}
	return true, "", nil
}

// statusSpeaks says whether the operator has written u's status and the
// scenario's converged expressions read it: then the operator says when
// it is done, and what it owns need not be watched until it stays the
// same. An operator that writes no status shows its work only by what
// it owns (converged: "true").
func (r *run) statusSpeaks(u *unstructured.Unstructured) bool {
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	return len(status) > 0 && slices.ContainsFunc(r.s.Spec.Resource.Converged, func(expr string) bool {
		return strings.Contains(expr, "self.status")
	})
}

// podsReady says whether every pod of the namespace is ready and none is
// terminating, and every StatefulSet there has made its pods; else which
// pod is not. The error is a failed look.
func (r *run) podsReady(ctx context.Context) (bool, string, error) {
	pods := &corev1.PodList{}
	if err := r.e.Client.List(ctx, pods, client.InNamespace(r.ns)); err != nil {
		return false, "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() || !framework.PodReady(p) {
			return false, fmt.Sprintf("pod %s ready %v, terminating %v (phase %s%s)", p.Name, framework.PodReady(p), !p.DeletionTimestamp.IsZero(), p.Status.Phase, waitingReasons(p)), nil
		}
	}
	// A pod its StatefulSet has not made yet is not ready either: no pod
	// at all is not every pod ready (a recreated resource's new pods wait
	// for the old ones, of the same names, to go).
	missing, err := r.podsNotMade(ctx, pods)
	return err == nil && missing == "", missing, err
}

// operatorActed says whether the operator has done anything for the
// resource since the harness created it: written it (a status, a
// finalizer, a defaulted field) or made an object that names it as owner,
// and lists those objects ("<resource>/<name>", sorted). An operator that
// writes no status (spotahome's RedisFailover has none) shows itself only
// by its children.
func (r *run) operatorActed(ctx context.Context) (owned []string, acted bool, err error) {
	// A kind that cannot be listed leaves the others' answer standing.
	listed, err := compare.List(ctx, r.e.Dynamic, r.ns, actedOn...)
	owned = slices.Sorted(maps.Keys(listed.OwnedBy(string(r.obj.GetUID()))))
	if len(owned) > 0 || r.obj.GetResourceVersion() != r.createdRV {
		return owned, true, nil
	}
	return nil, false, err
}

// actedQuiet is how long the objects an operator owns must stay the same,
// once it has begun to act on a new resource, before its pods are judged:
// its first pass makes them one after another, a request or two apart.
const actedQuiet = 2 * time.Second

// waitingReasons lists, after a comma, the containers of p that wait and
// why (", redis waiting: ImagePullBackOff"): what a pod that is not ready
// is stuck on.
func waitingReasons(p *corev1.Pod) string {
	var out string
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			out += fmt.Sprintf(", %s waiting: %s", cs.Name, w.Reason)
		}
	}
	return out
}

// podsNotMade names the first pod a StatefulSet of the namespace should
// have (ordinals below its replicas) that pods lacks, or "".
func (r *run) podsNotMade(ctx context.Context, pods *corev1.PodList) (string, error) {
	sets := &appsv1.StatefulSetList{}
	if err := r.e.Client.List(ctx, sets, client.InNamespace(r.ns)); err != nil {
		return "", err
	}
	for _, sts := range sets.Items {
		if !sts.DeletionTimestamp.IsZero() {
			continue
		}
		want := int32(1)
		if sts.Spec.Replicas != nil {
			want = *sts.Spec.Replicas
		}
		for ord := range want {
			name := fmt.Sprintf("%s-%d", sts.Name, ord)
			if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == name }) {
				return fmt.Sprintf("pod %s of StatefulSet %s not made yet", name, sts.Name), nil
			}
		}
	}
	return "", nil
}

// unmet says which converged expression stops the wait, and the status it
// was judged on: false, or not evaluable (a field it reads is missing).
func unmet(i int, src string, err error, status string) string {
	if err != nil {
		return fmt.Sprintf("converged[%d] %q cannot be evaluated: %v; status %s", i, src, err, status)
	}
	return fmt.Sprintf("converged[%d] %q is false; status %s", i, src, status)
}

// ExpectRefusal says that the scenario name's run sets fields that the
// operator may refuse: a condition naming one, for the resource's
// generation, ends the run's wait to converge at once (an explore
// campaign's runs, whose values the operator may not take).
func (e *Engine) ExpectRefusal(name string, fields []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refusable == nil {
		e.refusable = map[string][]string{}
	}
	e.refusable[name] = fields
}

// refusedIn is report.NamedInCondition over the conditions u shows for its
// generation (a condition's own observedGeneration, else the status's:
// an operator that refuses a spec may leave the status's behind), for
// the fields its run set that the operator may refuse ("" when none).
func (r *run) refusedIn(u *unstructured.Unstructured) string {
	r.e.mu.Lock()
	fields := r.e.refusable[r.s.Metadata.Name]
	r.e.mu.Unlock()
	if len(fields) == 0 {
		return ""
	}
	// A condition says which generation it speaks of, or the status does.
	observed, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	var current []report.Condition
	for _, c := range conditionsOf(u) {
		gen := c.ObservedGeneration
		if gen == 0 && found {
			gen = observed
		}
		if gen == 0 || gen >= u.GetGeneration() {
			current = append(current, reportCondition(c))
		}
	}
	return report.NamedInCondition(current, fields)
}
