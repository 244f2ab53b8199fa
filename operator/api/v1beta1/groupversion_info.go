// Package v1beta1 contains the current API of the reference operator: the
// DatabaseCluster kind in the database.gauntlet.dev group. It is the storage
// version and the conversion hub; v1alpha1 is still served and converts to
// and from it through the manager's conversion webhook.
//
// +kubebuilder:object:generate=true
// +groupName=database.gauntlet.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "database.gauntlet.dev", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &DatabaseCluster{}, &DatabaseClusterList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
