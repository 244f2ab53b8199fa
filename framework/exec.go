package framework

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// ExecResult is what a command run in a container printed.
type ExecResult struct {
	Stdout, Stderr string
}

// Exec runs command in a container of a pod, as `kubectl exec` does, and
// returns its output. A non-zero exit is an error that carries stderr.
func Exec(ctx context.Context, cfg *rest.Config, namespace, pod, container string, command ...string) (ExecResult, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return ExecResult{}, err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return ExecResult{}, err
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	res := ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		return res, fmt.Errorf("exec %q in %s/%s: %w: %s", strings.Join(command, " "), namespace, pod, err, strings.TrimSpace(res.Stderr))
	}
	return res, nil
}
