package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/render"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// Scratch is a scenario's resource created as a run creates it, in a
// namespace of its own, for requests outside any run: an explore
// campaign's dry runs of the values it may try.
type Scratch struct {
	// Object is the resource as created; Resource, where it is served.
	Object   *unstructured.Unstructured
	Resource schema.GroupVersionResource
	// Resources reads and writes the cluster's objects.
	Resources dynamic.Interface
	r         *run
}

// Scratch creates s's resource in a namespace of its own. The caller
// deletes it (Delete) before any run, or the operator reconciles it all
// along.
func (e *Engine) Scratch(ctx context.Context, s *scenario.Scenario) (*Scratch, error) {
	r := &run{e: e, s: s, vars: render.Vars{Overrides: e.o.Overrides, Defaults: s.Spec.Variables}}
	if err := r.create(ctx); err != nil {
		if r.ns != "" {
			_ = e.Client.Delete(context.WithoutCancel(ctx), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})
		}
		return nil, err
	}
	return &Scratch{Object: r.obj, Resource: r.gvr, Resources: e.Dynamic, r: r}, nil
}

// Namespace is the scratch resource's namespace.
func (s *Scratch) Namespace() string { return s.r.ns }

// Delete deletes the resource, waits until it is gone, then deletes its
// namespace.
func (s *Scratch) Delete(ctx context.Context) error {
	err := s.r.deleteResource(ctx)
	if err != nil {
		err = fmt.Errorf("the scratch resource: %w", err)
	}
	nsErr := client.IgnoreNotFound(s.r.e.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.r.ns}}))
	return errors.Join(err, nsErr)
}
