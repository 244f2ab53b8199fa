package compare

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func child(kind string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
		"metadata": map[string]any{"name": "x", "namespace": "ns", "resourceVersion": "1"}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// What Kubernetes' controllers write (a child's status, the volume
// binder's annotations) and the resourceVersion that follows are not the
// operator's writing; its spec, labels and a Secret's values are.
func TestWrittenChanges(t *testing.T) {
	tests := []struct {
		name          string
		kind          string
		before, after map[string]any
		want          []string
	}{
		{name: "a StatefulSet's pods restart", kind: "StatefulSet",
			before: map[string]any{"spec": map[string]any{"replicas": int64(3)}, "status": map[string]any{"readyReplicas": int64(3)}},
			after:  map[string]any{"spec": map[string]any{"replicas": int64(3)}, "status": map[string]any{"readyReplicas": int64(2)}}},
		{name: "the operator changes the template", kind: "StatefulSet",
			before: map[string]any{"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "a:1"}}}}}},
			after:  map[string]any{"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "a:2"}}}}}},
			want:   []string{"spec.template.spec.containers[0].image"}},
		{name: "a field is dropped", kind: "Service",
			before: map[string]any{"spec": map[string]any{"publishNotReadyAddresses": true, "type": "ClusterIP"}},
			after:  map[string]any{"spec": map[string]any{"type": "ClusterIP"}},
			want:   []string{"spec.publishNotReadyAddresses"}},
		{name: "a Secret's value is rewritten", kind: "Secret",
			before: map[string]any{"data": map[string]any{"password": "YQ=="}},
			after:  map[string]any{"data": map[string]any{"password": "Yg=="}},
			want:   []string{"data.password"}},
		{name: "a claim is bound", kind: "PersistentVolumeClaim",
			before: map[string]any{"spec": map[string]any{"storageClassName": "standard"}, "status": map[string]any{"phase": "Pending"}},
			after:  map[string]any{"spec": map[string]any{"storageClassName": "standard", "volumeName": "pvc-1"}, "status": map[string]any{"phase": "Bound"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before, after := child(tt.kind, tt.before), child(tt.kind, tt.after)
			after.SetResourceVersion("2")
			if tt.kind == "PersistentVolumeClaim" {
				after.SetAnnotations(map[string]string{"pv.kubernetes.io/bind-completed": "yes"})
			}
			g.Expect(Changed(Written(before), Written(after))).To(Equal(tt.want))
		})
	}
}

// A label the operator adds counts as a change.
func TestWrittenLabels(t *testing.T) {
	g := NewWithT(t)
	before, after := child("Service", nil), child("Service", nil)
	after.SetLabels(map[string]string{"app": "db"})
	g.Expect(Changed(Written(before), Written(after))).To(Equal([]string{"labels"}))
}
