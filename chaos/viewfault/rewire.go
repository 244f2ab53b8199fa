package viewfault

import (
	"net"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CAConfigMap names the ConfigMap that holds the proxy's CA in the
// operator's namespace.
const CAConfigMap = "gauntlet-api-proxy-ca"

// serviceAccountDir is where client-go's in-cluster configuration reads
// the token, the CA and the namespace.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// proxyTokenSeconds is the lifetime asked for the projected token:
// client-go re-reads the file, and the kubelet refreshes it well before.
const proxyTokenSeconds = 3607

// Rewire points a workload's pods (u: a Deployment, a StatefulSet, any
// object with spec.template.spec) at the proxy at addr: their in-cluster
// client reads the API server's address from KUBERNETES_SERVICE_HOST and
// _PORT, and its CA, token and namespace from the ServiceAccount folder,
// which becomes a projected volume of the pod's own token, the proxy's CA
// (CA's ConfigMap) and the namespace. The token is the pod's
// ServiceAccount's, so the proxy forwards with exactly its permissions.
func Rewire(u *unstructured.Unstructured, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	spec, _, err := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	if err != nil {
		return err
	}
	spec["automountServiceAccountToken"] = false
	volumes, _ := spec["volumes"].([]any)
	spec["volumes"] = append(volumes, map[string]any{
		"name": "gauntlet-api-proxy",
		"projected": map[string]any{"sources": []any{
			map[string]any{"serviceAccountToken": map[string]any{"path": "token", "expirationSeconds": int64(proxyTokenSeconds)}},
			map[string]any{"configMap": map[string]any{"name": CAConfigMap, "items": []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}}},
			map[string]any{"downwardAPI": map[string]any{"items": []any{map[string]any{"path": "namespace", "fieldRef": map[string]any{"fieldPath": "metadata.namespace"}}}}},
		}},
	})
	containers, _ := spec["containers"].([]any)
	for _, c := range containers {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		env, _ := cm["env"].([]any)
		cm["env"] = append(env,
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": host},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": port})
		mounts, _ := cm["volumeMounts"].([]any)
		cm["volumeMounts"] = append(mounts, map[string]any{"name": "gauntlet-api-proxy", "mountPath": serviceAccountDir, "readOnly": true})
	}
	return unstructured.SetNestedMap(u.Object, spec, "spec", "template", "spec")
}

// CA is the ConfigMap that carries the proxy's CA (caData) to the
// rewired pods of namespace.
func CA(namespace string, caData []byte) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": CAConfigMap, "namespace": namespace},
		"data":     map[string]any{"ca.crt": string(caData)},
	}}
}
