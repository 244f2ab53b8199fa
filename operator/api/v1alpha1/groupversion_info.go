// Package v1alpha1 is the first API of the reference operator: the
// DatabaseCluster kind in the database.gauntlet.dev group. It is still served
// and converts to and from v1beta1, the storage version and hub; what only
// v1beta1 can say is kept in an annotation so that nothing is lost on a round
// trip through v1alpha1.
//
// +kubebuilder:object:generate=true
// +groupName=database.gauntlet.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "database.gauntlet.dev", Version: "v1alpha1"}

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
