package sim

import (
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func newFake(scheme *runtime.Scheme) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(scheme).Build()
}
