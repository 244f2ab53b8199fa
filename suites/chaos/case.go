// Package chaos is the chaos tier of the reference operator: every scenario
// runs against a fresh three-member DatabaseCluster on a real cluster with
// Chaos Mesh, under a key-value workload, and is judged on the cluster's
// conditions, the operator's metrics and the data (no acknowledged write
// lost, a linearizable history). It uses the generic harness in
// github.com/gauntlet-dev/gauntlet/chaos; another operator writes its own
// package like this one.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos"
	"github.com/gauntlet-dev/gauntlet/operator"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	"github.com/gauntlet-dev/gauntlet/suites/e2e"
	"github.com/gauntlet-dev/gauntlet/suites/framework"
	"github.com/gauntlet-dev/gauntlet/suites/reference"
)

// maxMembers is how many member pods a case can reach (a scale-up to five).
const maxMembers = 5

// Case is one DatabaseCluster under test, reachable from the test process
// through tunnels that survive member pods being killed.
type Case struct {
	Env       *Env
	Namespace string
	Cluster   *dbv1.DatabaseCluster
	Etcd      *clientv3.Client
	tunnels   []*framework.Tunnel
	stop      context.CancelFunc
}

// NewCase creates a three-member cluster on image in its own namespace and
// waits until it is healthy.
func (e *Env) NewCase(ctx context.Context, name, image string) (*Case, error) {
	ns, err := e.namespace(ctx, name)
	if err != nil {
		return nil, err
	}
	c := &Case{Env: e, Namespace: ns,
		Cluster: reference.NewCluster(ns, "db").WithImage(image).WithDeletionPolicy(dbv1.DeletionPolicyDelete).Build()}
	if err := e.Client.Create(ctx, c.Cluster); err != nil {
		return c, err
	}
	if err := c.WaitConverged(ctx, 4*time.Minute); err != nil {
		return c, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = cancel
	var endpoints []string
	for i := range maxMembers {
		t, err := framework.OpenTunnel(tctx, e.Config, ns, fmt.Sprintf("%s-%d", c.Cluster.Name, i), 2379)
		if err != nil {
			return c, err
		}
		c.tunnels = append(c.tunnels, t)
		endpoints = append(endpoints, t.Addr)
	}
	c.Etcd, err = clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
	})
	return c, err
}

// Close closes the client and the tunnels.
func (c *Case) Close() {
	if c.Etcd != nil {
		_ = c.Etcd.Close()
	}
	if c.stop != nil {
		c.stop()
	}
}

// Pods returns the member pod names, by ordinal.
func (c *Case) Pods(ctx context.Context) ([]string, error) {
	pods := &corev1.PodList{}
	if err := c.Env.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(operator.SelectorLabels(c.Cluster))); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names, nil
}

// Leader returns the pod of the current etcd leader, asking each member
// (over its tunnel) until one reports itself leader.
func (c *Case) Leader(ctx context.Context) (string, error) {
	var leader string
	err := framework.PollFor(ctx, "an etcd leader", time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		var seen []string
		for i, t := range c.tunnels {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := c.Etcd.Status(sctx, t.Addr)
			cancel()
			if err != nil {
				seen = append(seen, fmt.Sprintf("%s-%d: %v", c.Cluster.Name, i, err))
				continue
			}
			if st.Header.MemberId == st.Leader {
				leader = fmt.Sprintf("%s-%d", c.Cluster.Name, i)
				return true, leader, nil
			}
			seen = append(seen, fmt.Sprintf("%s-%d: follower of %x", c.Cluster.Name, i, st.Leader))
		}
		return false, strings.Join(seen, "; "), nil
	})
	return leader, err
}

// Followers returns the member pods that are not the leader.
func (c *Case) Followers(ctx context.Context) (leader string, followers []string, err error) {
	if leader, err = c.Leader(ctx); err != nil {
		return "", nil, err
	}
	pods, err := c.Pods(ctx)
	if err != nil {
		return "", nil, err
	}
	for _, p := range pods {
		if p != leader {
			followers = append(followers, p)
		}
	}
	return leader, followers, nil
}

// Minority picks, with rng, the largest set of followers whose loss leaves
// quorum: (n-1)/2 of n members.
func (c *Case) Minority(ctx context.Context, rng *rand.Rand) ([]string, error) {
	_, followers, err := c.Followers(ctx)
	if err != nil {
		return nil, err
	}
	n := len(followers) + 1
	rng.Shuffle(len(followers), func(i, j int) { followers[i], followers[j] = followers[j], followers[i] })
	pick := followers[:(n-1)/2]
	slices.Sort(pick)
	return pick, nil
}

// watchedPods are the pods a scenario's timeline follows: the members and
// the operator's.
func (c *Case) watchedPods(ctx context.Context) ([]corev1.Pod, error) {
	members, operators := &corev1.PodList{}, &corev1.PodList{}
	if err := c.Env.Client.List(ctx, members, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	if err := c.Env.Client.List(ctx, operators, client.InNamespace(e2e.OperatorNamespace)); err != nil {
		return nil, err
	}
	return append(members.Items, operators.Items...), nil
}

// Members is the cluster's member pods as chaos targets.
func (c *Case) Members(names ...string) chaos.Pods {
	return chaos.Pods{Namespace: c.Namespace, Names: names}
}

// Scale sets spec.replicas, retrying while the webhook (served by the
// operator, which a scenario may be killing) cannot be reached.
func (c *Case) Scale(ctx context.Context, n int32) error {
	return c.update(ctx, "scale to "+fmt.Sprint(n), func(d *dbv1.DatabaseCluster) { d.Spec.Replicas = ptr.To(n) })
}

// Upgrade sets spec.image, retrying like Scale.
func (c *Case) Upgrade(ctx context.Context, image string) error {
	return c.update(ctx, "upgrade to "+image, func(d *dbv1.DatabaseCluster) { d.Spec.Image = image })
}

func (c *Case) update(ctx context.Context, what string, mutate func(*dbv1.DatabaseCluster)) error {
	return framework.PollFor(ctx, "the API server to accept the "+what, 3*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		d := &dbv1.DatabaseCluster{}
		if err := c.Env.Client.Get(ctx, client.ObjectKeyFromObject(c.Cluster), d); err != nil {
			return false, err.Error(), nil
		}
		mutate(d)
		if err := c.Env.Client.Update(ctx, d); err != nil {
			return false, err.Error(), nil
		}
		c.Cluster = d
		return true, "", nil
	})
}

// ReplaceMember deletes a member's volume claim and pod, so that it comes
// back empty and the operator must replace it as a new member.
func (c *Case) ReplaceMember(ctx context.Context, pod string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	pvc.Namespace, pvc.Name = c.Namespace, "data-"+pod
	p := &corev1.Pod{}
	p.Namespace, p.Name = c.Namespace, pod
	return errors.Join(client.IgnoreNotFound(c.Env.Client.Delete(ctx, pvc)), client.IgnoreNotFound(c.Env.Client.Delete(ctx, p)))
}

// WaitConverged waits until the cluster is Available, neither Progressing
// nor Degraded, has spec.replicas healthy voting members, and every member
// pod is ready and runs spec.image.
func (c *Case) WaitConverged(ctx context.Context, timeout time.Duration) error {
	return framework.PollFor(ctx, c.Cluster.Name+" to converge", timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		d := &dbv1.DatabaseCluster{}
		if err := c.Env.Client.Get(ctx, client.ObjectKeyFromObject(c.Cluster), d); err != nil {
			return false, err.Error(), nil
		}
		c.Cluster = d
		want := int(ptr.Deref(d.Spec.Replicas, 3))
		if ok, seen := e2e.Healthy(d, want); !ok {
			return false, seen, nil
		}
		seen := fmt.Sprintf("%d members healthy", want)
		pods := &corev1.PodList{}
		if err := c.Env.Client.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(operator.SelectorLabels(d))); err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods.Items {
			if !framework.PodReady(&p) || p.Spec.Containers[0].Image != d.Spec.Image {
				return false, seen + fmt.Sprintf("\npod %s ready %v image %s", p.Name, framework.PodReady(&p), p.Spec.Containers[0].Image), nil
			}
		}
		return len(pods.Items) == want, seen + fmt.Sprintf("\n%d pods", len(pods.Items)), nil
	})
}

// ownedVersions maps every object the operator owns in the namespace to
// its resourceVersion.
func (c *Case) ownedVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"StatefulSet": &appsv1.StatefulSetList{}, "Service": &corev1.ServiceList{},
		"ConfigMap": &corev1.ConfigMapList{}, "PodDisruptionBudget": &policyv1.PodDisruptionBudgetList{},
	}
	for kind, l := range lists {
		if err := c.Env.Client.List(ctx, l, client.InNamespace(c.Namespace)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			o := it.(client.Object)
			if metav1IsControlledBy(o, c.Cluster) {
				out[kind+"/"+o.GetName()] = o.GetResourceVersion()
			}
		}
	}
	return out, nil
}

func metav1IsControlledBy(o client.Object, owner client.Object) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.UID == owner.GetUID() && ptr.Deref(r.Controller, false) {
			return true
		}
	}
	return false
}

// Unstable watches the owned objects for d and returns those whose
// resourceVersion changed: a converged operator writes nothing.
func (c *Case) Unstable(ctx context.Context, d time.Duration) ([]string, error) {
	before, err := c.ownedVersions(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	after, err := c.ownedVersions(ctx)
	if err != nil {
		return nil, err
	}
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, fmt.Sprintf("%s (resourceVersion %s -> %s)", k, before[k], v))
		}
	}
	slices.Sort(changed)
	return changed, nil
}
