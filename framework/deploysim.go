package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeploymentSimulator plays the Deployment controller and the kubelets for
// backends that run neither (the fake client, envtest): each Step moves every Deployment's
// status one replica toward its spec and writes it only if it changed, so a
// settled world makes no writes. It works on any Deployment.
//
// One Step does one of, in order: add or remove a replica (new pods run the
// current template and start not ready); make one pod ready; replace one pod
// running an older template with a new, not yet ready one. A changed
// template counts every existing pod as outdated. It writes status only:
// no pods (an operator that reads its Deployment's pods sees none).
type DeploymentSimulator struct {
	// Client reads Deployments and writes their status.
	Client client.Client

	// rolled is the template hash each Deployment's updatedReplicas counts.
	rolled map[client.ObjectKey]uint64
}

// Step advances every Deployment by one replica and reports whether it wrote.
func (s *DeploymentSimulator) Step(ctx context.Context) (bool, error) {
	if s.rolled == nil {
		s.rolled = map[client.ObjectKey]uint64{}
	}
	list := &appsv1.DeploymentList{}
	if err := s.Client.List(ctx, list); err != nil {
		return false, fmt.Errorf("listing deployments: %w", err)
	}
	changed := false
	var errs []error
	for i := range list.Items {
		d := &list.Items[i]
		if !d.DeletionTimestamp.IsZero() {
			continue
		}
		key := client.ObjectKeyFromObject(d)
		hash, err := templateHash(d)
		if err != nil {
			return changed, err
		}
		prev, seen := s.rolled[key]
		next := nextDeploymentStatus(d, seen && prev != hash)
		if equality.Semantic.DeepEqual(next, d.Status) {
			s.rolled[key] = hash
			continue
		}
		d.Status = next
		if err := s.Client.Status().Update(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("deployment %s: %w", key, err))
			continue
		}
		s.rolled[key] = hash
		changed = true
	}
	return changed, errors.Join(errs...)
}

// nextDeploymentStatus is one step of the Deployment controller and the
// kubelets: a pure function of the Deployment (and whether its template
// changed since the last step).
func nextDeploymentStatus(d *appsv1.Deployment, templateChanged bool) appsv1.DeploymentStatus {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := *d.Status.DeepCopy()
	if templateChanged {
		s.UpdatedReplicas = 0
	}
	switch {
	case s.Replicas < want:
		s.Replicas++
		s.UpdatedReplicas++
	case s.Replicas > want:
		s.Replicas--
		s.UpdatedReplicas = min(s.UpdatedReplicas, s.Replicas)
		s.ReadyReplicas = min(s.ReadyReplicas, s.Replicas)
	case s.ReadyReplicas < s.Replicas:
		s.ReadyReplicas++
	case s.UpdatedReplicas < s.Replicas:
		s.UpdatedReplicas++
		s.ReadyReplicas--
	}
	s.AvailableReplicas = s.ReadyReplicas
	s.UnavailableReplicas = s.Replicas - s.ReadyReplicas
	s.ObservedGeneration = d.Generation
	return s
}

func templateHash(d *appsv1.Deployment) (uint64, error) {
	data, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return 0, fmt.Errorf("hashing the template of %s: %w", d.Name, err)
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return h.Sum64(), nil
}
