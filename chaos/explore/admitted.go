package explore

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gauntlet-dev/gauntlet/chaos/engine"
	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// admitted dry-runs each step against the base resource, created in a
// namespace of its own for the purpose, and returns the steps the API
// server admits; it records in x those it refuses (with its answer),
// and, where another served version has the step's field, the steps one
// version admits and another refuses (a version skew: an object one
// version takes that the other cannot hold).
func admitted(ctx context.Context, e Engine, base *scenario.Scenario, obj *unstructured.Unstructured, steps []space.Step, versions []engine.ServedVersion, x *report.Campaign) ([]space.Step, error) {
	scratch, err := e.Scratch(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("the starting resource (%s), which the campaign's every step patches: %w", base.Spec.Resource.Manifest, err)
	}
	defer func() {
		// Gone before any run: a resource left behind would be reconciled
		// all campaign long, its state in every process of the operator.
		if err := scratch.Delete(context.WithoutCancel(ctx)); err != nil {
			e.Logf("explore: the resource the dry runs patched: %v", err)
		}
	}()
	ns := scratch.Namespace()
	resources := scratch.Resources
	dryRun := func(version string, patch []byte) error {
		gvr := scratch.Resource
		gvr.Version = version
		_, err := resources.Resource(gvr).Namespace(ns).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	createDryRun := func(st space.Step) error {
		created, err := space.WithSteps(obj, []space.Step{st})
		if err != nil {
			return err
		}
		created.SetNamespace(ns)
		created.SetName(obj.GetName() + "-created")
		_, err = resources.Resource(scratch.Resource).Namespace(ns).Create(ctx, created, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	var ok []space.Step
	for _, st := range steps {
		patch, err := json.Marshal(st.Patch())
		if err != nil {
			return nil, err
		}
		err = dryRun(versions[0].Name, patch)
		switch {
		case err == nil:
			ok = append(ok, st)
		case createDryRun(st) == nil:
			// Refused as a change, admitted at creation: a field its
			// rules keep as it was created.
			st.AtCreation = true
			ok = append(ok, st)
		default:
			x.Refused = append(x.Refused, fmt.Sprintf("%s: %v", st, err))
		}
		for _, v := range versions[1:] {
			if !space.HasField(v.Spec, st.Path[1:]) || (st.Leaf != nil && !space.HasField(v.Spec, st.Leaf[1:])) {
				continue
			}
			x.CrossVersion++
			other := dryRun(v.Name, patch)
			if (err == nil) != (other == nil) {
				x.VersionSkews = append(x.VersionSkews, fmt.Sprintf("%s: %s through %s, %s through %s",
					st, verdictText(err), versions[0].Name, verdictText(other), v.Name))
			}
		}
	}
	return ok, nil
}

func verdictText(err error) string {
	if err == nil {
		return "admitted"
	}
	return "refused (" + err.Error() + ")"
}
