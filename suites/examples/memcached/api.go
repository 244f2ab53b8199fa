package memcached

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the Memcached kind.
	GroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}

	// SchemeBuilder registers the Memcached kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the Memcached kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Condition types of a Memcached.
const (
	// ConditionAvailable is True when every replica of the spec is ready.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the Deployment rolls out.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the last reconcile pass failed.
	ConditionDegraded = "Degraded"
)

// Reasons of the Available condition.
const (
	ReasonReplicasReady    = "ReplicasReady"
	ReasonReplicasNotReady = "ReplicasNotReady"
)

// Reasons of the Progressing condition.
const (
	ReasonRollingOut      = "RollingOut"
	ReasonRolloutComplete = "RolloutComplete"
)

// ReasonDeploymentNotObserved is the reason of an Unknown Available or
// Progressing condition: no pass has read the Deployment yet.
const ReasonDeploymentNotObserved = "DeploymentNotObserved"

// Reasons of the Degraded condition.
const (
	ReasonReconciled      = "Reconciled"
	ReasonReconcileFailed = "ReconcileFailed"
)

// MemcachedSpec is the desired state of a Memcached.
type MemcachedSpec struct {
	// Size is the number of memcached replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	Size int32 `json:"size"`
	// Image is the memcached container image.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
}

// MemcachedStatus is the observed state of a Memcached.
type MemcachedStatus struct {
	// Conditions: Available, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the last successful pass acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Memcached is a memcached cache run as a Deployment.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemcachedSpec   `json:"spec,omitempty"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions, for framework.HaveCondition.
func (m *Memcached) GetConditions() []metav1.Condition { return m.Status.Conditions }

// MemcachedList is a list of Memcached.
//
// +kubebuilder:object:root=true
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}
