package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
)

// TestEveryAdmissionRuleOnEveryPath: for every rule the CRD states about a
// DatabaseCluster's spec (found by walking the generated schema, so a new
// marker without a case here fails this test), an object that breaks it is
// sent through both served versions, with strict field validation as
// kubectl sends, and must be refused with a message naming the field and
// the value given. Through v1alpha1, v1beta1's fields ride in the
// annotation; they are held to the same rules. The valid objects the cases
// start from are admitted through both versions.
func TestEveryAdmissionRuleOnEveryPath(t *testing.T) {
	ns := newNamespace(t, "rules-")
	for _, base := range []string{"s3", "volume"} {
		for _, version := range []string{"v1beta1", "v1alpha1"} {
			obj := inVersion(validCluster(ns, "valid-"+base+"-"+version[:7], base), version)
			NewWithT(t).Expect(env.Client.Create(t.Context(), obj, client.FieldValidation("Strict"))).
				To(Succeed(), "the valid %s object through %s", base, version)
		}
	}
	rules := crdRules(t)
	n := 0
	for _, r := range rules {
		v, ok := generated(r)
		if !ok {
			v, ok = celViolation(r)
		}
		if !ok {
			t.Errorf("rule %s has no case: add one to celCases", r)
			continue
		}
		n += refusedThroughBoth(t, ns, n, r.String(), v)
	}
	for name, v := range goRules {
		if v.at == "" {
			v.at = v.path
		}
		if v.base == "" {
			v.base = "s3"
		}
		n += refusedThroughBoth(t, ns, n, name, v)
	}
	t.Logf("%d rules in the CRD and %d in Go, %d invalid objects sent through both versions", len(rules), len(goRules), n)
}

// refusedThroughBoth sends v through each served version, as subtests
// named after the rule, each object numbered after the n sent before it;
// it returns how many it sent.
func refusedThroughBoth(t *testing.T, ns string, n int, rule string, v violation) int {
	versions := []string{"v1beta1", "v1alpha1"}
	for i, version := range versions {
		name := fmt.Sprintf("r%d-%s", n+i+1, version[:7])
		t.Run(fmt.Sprintf("%s via %s", rule, version), func(t *testing.T) {
			refused(t, ns, name, version, v)
		})
	}
	return len(versions)
}

// refused sends the violation through version and checks the refusal.
func refused(t *testing.T, ns, name, version string, v violation) {
	g := NewWithT(t)
	ctx := t.Context()
	obj := validCluster(ns, name, v.base)
	if v.update {
		g.Expect(env.Client.Create(ctx, inVersion(obj, version), client.FieldValidation("Strict"))).To(Succeed())
	}
	g.Expect(setPath(obj, v.path, v.value, v.remove)).To(Succeed())
	sent := inVersion(obj, version)
	var err error
	if v.update {
		// The operator adds its finalizer meanwhile: write over the
		// latest stored version, keeping what the operator wrote.
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(sent.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sent), cur); err != nil {
				return err
			}
			sent.SetResourceVersion(cur.GetResourceVersion())
			sent.SetFinalizers(cur.GetFinalizers())
			return env.Client.Update(ctx, sent, client.FieldValidation("Strict"))
		})
	} else {
		err = env.Client.Create(ctx, sent, client.FieldValidation("Strict"))
	}
	g.Expect(err).To(HaveOccurred(), "admitted through %s: %s", version, v.path)
	paths := []string{v.at}
	if version == "v1alpha1" {
		paths = append(paths, strings.Replace(v.at, "spec.restoreFrom.volume", "spec.restoreFrom", 1))
	}
	g.Expect(err.Error()).To(Or(ContainSubstring(paths[0]), ContainSubstring(paths[len(paths)-1])), "the field's path")
	if v.want != "" {
		g.Expect(err.Error()).To(ContainSubstring(v.want), "the value given, or what is wrong")
	}
	if len(v.wantOneOf) > 0 {
		var any []types.GomegaMatcher
		for _, w := range v.wantOneOf {
			any = append(any, ContainSubstring(w))
		}
		g.Expect(err.Error()).To(Or(any...), "the limit or the value given")
	}
}

// validCluster is a v1beta1 DatabaseCluster every rule admits, with every
// optional section set: S3 backups and an S3 restore source, or volume ones.
func validCluster(ns, name, base string) map[string]any {
	s3 := func() map[string]any {
		return map[string]any{
			"endpoint": "https://s3.example.com:9000", "bucket": "snaps", "prefix": "db/", "region": "eu-west-1",
			"credentialsSecret": map[string]any{"name": "s3-credentials"},
		}
	}
	backupTo := map[string]any{"s3": s3()}
	restore := map[string]any{"s3": merge(s3(), map[string]any{"key": "db.snapshot"})}
	if base == "volume" {
		backupTo = map[string]any{"volume": map[string]any{}}
		restore = map[string]any{"volume": map[string]any{"claimName": "snaps", "file": "db.snapshot"}}
	}
	return map[string]any{
		"apiVersion": "database.gauntlet.dev/v1beta1", "kind": "DatabaseCluster",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"replicas": int64(3), "image": "gauntlet.dev/etcd:v3.6.16", "deletionPolicy": "Snapshot",
			"storage":     map[string]any{"size": "1Gi", "storageClassName": "standard"},
			"restoreFrom": restore,
			"backup": map[string]any{
				"schedule":    "0 3 * * *",
				"retention":   map[string]any{"count": int64(3), "maxAge": "168h"},
				"destination": backupTo,
			},
		},
	}
}

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// setPath sets (or removes) the field at a dotted path; "name[0]" is the
// first item of a list, made when missing.
func setPath(obj map[string]any, path string, value any, remove bool) error {
	parts := strings.Split(path, ".")
	cur := obj
	for i, part := range parts {
		last := i == len(parts)-1
		key, index, isItem := strings.Cut(part, "[")
		if isItem {
			idx, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if err != nil {
				return err
			}
			items, _ := cur[key].([]any)
			for len(items) <= idx {
				items = append(items, map[string]any{})
			}
			cur[key] = items
			cur = items[idx].(map[string]any)
			continue
		}
		switch {
		case last && remove:
			delete(cur, key)
		case last:
			cur[key] = value
		default:
			next, ok := cur[key].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[key] = next
			}
			cur = next
		}
	}
	return nil
}

// inVersion is obj as a user writes it through version: through
// v1alpha1, restoreFrom's volume is restoreFrom itself, and what only
// v1beta1 can say goes into the annotation.
func inVersion(obj map[string]any, version string) *unstructured.Unstructured {
	out := runtime.DeepCopyJSON(obj)
	if version == "v1beta1" {
		return &unstructured.Unstructured{Object: out}
	}
	out["apiVersion"] = "database.gauntlet.dev/v1alpha1"
	spec := out["spec"].(map[string]any)
	hub := map[string]any{}
	if b, ok := spec["backup"]; ok {
		hub["backup"] = b
		delete(spec, "backup")
	}
	if rf, ok := spec["restoreFrom"].(map[string]any); ok {
		delete(spec, "restoreFrom")
		if s3, ok := rf["s3"]; ok {
			hub["restoreFromS3"] = s3
		}
		if vol, ok := rf["volume"].(map[string]any); ok {
			spec["restoreFrom"] = vol
		} else if _, ok := rf["s3"]; !ok {
			spec["restoreFrom"] = map[string]any{}
		}
	}
	u := &unstructured.Unstructured{Object: out}
	if len(hub) > 0 {
		raw, _ := json.Marshal(hub)
		u.SetAnnotations(map[string]string{dbv1alpha1.HubOnlyAnnotation: string(raw)})
	}
	return u
}
