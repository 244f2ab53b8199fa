package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// PortForward is a running port-forward to one pod port, as `kubectl
// port-forward` does it (client-go's portforward over SPDY).
type PortForward struct {
	// Local is the local port that reaches the pod's port.
	Local uint16
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	errs  *strings.Builder
}

// ForwardPort forwards a free local port on 127.0.0.1 to port of the pod,
// and returns once the forward is ready. Close it when done.
func ForwardPort(ctx context.Context, cfg *rest.Config, namespace, pod string, port int) (*PortForward, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	url := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	pf := &PortForward{stop: make(chan struct{}), done: make(chan struct{}), errs: &strings.Builder{}}
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, pf.stop, ready, io.Discard, &lockedWriter{w: pf.errs})
	if err != nil {
		return nil, err
	}
	var runErr error
	go func() {
		defer close(pf.done)
		runErr = fw.ForwardPorts()
	}()
	select {
	case <-ready:
	case <-pf.done:
		return nil, fmt.Errorf("port-forward to %s/%s:%d: %w (%s)", namespace, pod, port, runErr, pf.errs.String())
	case <-ctx.Done():
		pf.Close()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		pf.Close()
		return nil, fmt.Errorf("port-forward to %s/%s:%d not ready after 30s (%s)", namespace, pod, port, pf.errs.String())
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		pf.Close()
		return nil, fmt.Errorf("port-forward to %s/%s:%d: no local port: %w", namespace, pod, port, err)
	}
	pf.Local = ports[0].Local
	return pf, nil
}

// Done is closed when the forward ends: closed, or its pod gone.
func (pf *PortForward) Done() <-chan struct{} { return pf.done }

// Close stops the forward.
func (pf *PortForward) Close() {
	pf.once.Do(func() { close(pf.stop) })
	<-pf.done
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
