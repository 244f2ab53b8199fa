package controller

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// TestSameConfigurationIgnoresTheWireEncoding: a StatefulSet read as JSON
// carries kind, apiVersion and a Pending phase in its claim templates,
// which protobuf leaves out; the configuration the operator applied is the
// same either way, so a converged pass must not apply again.
func TestSameConfigurationIgnoresTheWireEncoding(t *testing.T) {
	// The builder makes the template without kind and apiVersion, as the
	// operator's does.
	template := &corev1ac.PersistentVolumeClaimApplyConfiguration{}
	template.WithName("data").WithSpec(corev1ac.PersistentVolumeClaimSpec().WithAccessModes("ReadWriteOnce"))
	desired := appsv1ac.StatefulSet("db", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithReplicas(3).WithVolumeClaimTemplates(template))
	// What ExtractStatefulSet gives for the object as JSON carries it.
	var sts appsv1.StatefulSet
	if err := json.Unmarshal([]byte(`{"kind":"StatefulSet","apiVersion":"apps/v1","metadata":{"name":"db","namespace":"ns"},"spec":{"replicas":3,
		"volumeClaimTemplates":[{"kind":"PersistentVolumeClaim","apiVersion":"v1","metadata":{"name":"data"},
		"spec":{"accessModes":["ReadWriteOnce"]},"status":{"phase":"Pending"}}]}}`), &sts); err != nil {
		t.Fatal(err)
	}
	read := appsv1ac.StatefulSet("db", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithReplicas(3).
		WithVolumeClaimTemplates((&corev1ac.PersistentVolumeClaimApplyConfiguration{}).WithKind("PersistentVolumeClaim").WithAPIVersion("v1").
			WithName("data").WithSpec(corev1ac.PersistentVolumeClaimSpec().WithAccessModes("ReadWriteOnce"))))
	if k := sts.Spec.VolumeClaimTemplates[0].Kind; k != "PersistentVolumeClaim" {
		t.Fatalf("JSON decoding kept kind %q", k)
	}
	same, err := sameConfiguration(read, desired)
	if err != nil || !same {
		t.Fatalf("claim templates differing only in kind and apiVersion compare as different (%v)", err)
	}
	other := appsv1ac.StatefulSet("db", "ns").WithSpec(appsv1ac.StatefulSetSpec().WithReplicas(5))
	if same, _ := sameConfiguration(other, desired); same {
		t.Fatal("a different replica count compares as the same")
	}
}
