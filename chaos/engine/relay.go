package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
	"github.com/gauntlet-dev/gauntlet/framework/apirelay"
)

// RelayImage is the API relay's image this version of the harness speaks
// to (cmd/api-relay; make relay-image builds it).
var RelayImage = fmt.Sprintf("gauntlet.dev/api-relay:v%d", apirelay.Version)

// relayName names the relay's Deployment, Service and pods' label.
const relayName = "gauntlet-api-relay"

// The relay's ports: the operator's connections, the harness's tunnels.
const (
	relayClientPort = 8443
	relayTunnelPort = 9443
)

// relay is the in-cluster half of the API proxy's path when the cluster's
// pods cannot reach this machine.
type relay struct {
	namespace string
	tunnels   *apirelay.Tunnels
	stop      context.CancelFunc
	local     atomic.Int32 // the port-forward's local port, 0 while none
}

// startRelayedProxy starts the API proxy on this machine's loopback and
// a relay in the cluster, in the operator's namespace: the operator's
// pods connect to the relay's Service, and the relay hands each
// connection to the proxy through tunnels the harness opens over a
// port-forward. TLS runs from the operator to the proxy (whose
// certificate names the Service's address); the relay only splices bytes.
func (e *Engine) startRelayedProxy(ctx context.Context) error {
	start := time.Now()
	ns := e.operator.Namespace
	image := e.relayImage()
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	svc := relayService(ns)
	if err := e.Client.Create(ctx, svc); apierrors.IsAlreadyExists(err) {
		// Left by an earlier run: it is ours, its address stays.
		err = e.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc)
		if err != nil {
			return fmt.Errorf("the API relay's Service: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("the API relay's Service: %w", err)
	}
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if ip == nil {
		return fmt.Errorf("the API relay's Service %s/%s has no cluster IP (%q)", ns, relayName, svc.Spec.ClusterIP)
	}
	p, err := apiproxy.StartWith(e.Config, 0, apiproxy.Options{IPs: []net.IP{ip}, ErrorLog: e.proxyLog()})
	if err != nil {
		return err
	}
	if err := e.createOrReplace(ctx, relayDeployment(ns, image)); err != nil {
		return errors.Join(fmt.Errorf("the API relay's Deployment: %w", err), p.Close())
	}
	rctx, stop := context.WithCancel(context.Background())
	r := &relay{namespace: ns, stop: stop}
	r.tunnels = &apirelay.Tunnels{Dial: r.dial, Target: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port())), Logf: e.logf}
	e.view = &viewAccess{proxy: p, kill: e.killOperatorPods, target: e.operatorTarget}
	e.relay = r
	e.proxyAddr = net.JoinHostPort(ip.String(), strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	pod, err := e.relayPod(ctx, image)
	if err != nil {
		return err
	}
	if err := e.relayEndpoint(ctx); err != nil {
		return err
	}
	pf, err := framework.ForwardPort(ctx, e.Config, ns, pod, relayTunnelPort)
	if err != nil {
		return fmt.Errorf("port-forward to the API relay's pod: %w", err)
	}
	r.local.Store(int32(pf.Local))
	go e.keepForwarding(rctx, r, pod, pf)
	go r.tunnels.Run(rctx)
	e.logf("API proxy for the view faults on this machine, reached by the operator's pods through the relay %s/%s at %s (image %s, port-forwarded) in %s",
		ns, relayName, e.proxyAddr, image, time.Since(start).Round(time.Millisecond))
	return nil
}

// viaRelay says whether the operator's pods reach the API proxy through
// the relay: asked for, or an existing cluster whose pods' route to this
// machine was not given.
func (e *Engine) viaRelay() bool {
	if !e.proxied() {
		return false
	}
	return e.o.Relay.Always || (e.o.Cluster.Existing && e.o.Cluster.HostAddress == "")
}

func (e *Engine) relayImage() string {
	if e.o.Relay.Image != "" {
		return e.o.Relay.Image
	}
	return RelayImage
}

// dial opens a tunnel through the current port-forward.
func (r *relay) dial(ctx context.Context) (net.Conn, error) {
	port := r.local.Load()
	if port == 0 {
		return nil, errors.New("no port-forward to the relay's pod yet")
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
}

// keepForwarding keeps pf, a port-forward to a ready relay pod's tunnel
// port, until ctx ends, forwarding again to the pod that replaces one
// lost.
func (e *Engine) keepForwarding(ctx context.Context, r *relay, pod string, pf *framework.PortForward) {
	failing := false
	for ctx.Err() == nil {
		var err error
		if pf == nil {
			pf, err = framework.ForwardPort(ctx, e.Config, r.namespace, pod, relayTunnelPort)
			if err != nil && !failing && ctx.Err() == nil {
				e.logf("forwarding to the API relay's pod %s: %v (retrying every second)", pod, err)
			}
			failing = err != nil
		}
		if err == nil {
			r.local.Store(int32(pf.Local))
			select {
			case <-pf.Done():
			case <-ctx.Done():
			}
			r.local.Store(0)
			pf.Close()
			pf = nil
			if ctx.Err() != nil {
				return
			}
			e.logf("the port-forward to the API relay's pod %s ended; forwarding again", pod)
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
		if p, err := e.readyRelayPod(ctx); err == nil && p != "" {
			pod = p
		}
	}
}

// The relay's waits: its pod pulls a small image (or has it loaded) and
// starts at once; its endpoint follows readiness within seconds.
const (
	relayReadyWithin    = 2 * time.Minute
	relayEndpointWithin = time.Minute
)

// relayPod waits for a ready relay pod and names it. A pod that cannot
// start (its image is not on the nodes or in a registry they pull from)
// fails at once with the reason.
func (e *Engine) relayPod(ctx context.Context, image string) (string, error) {
	var name string
	err := framework.PollFor(ctx, "the API relay's pod ready", relayReadyWithin, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			ready, pods, err := e.relayPods(ctx)
			if err != nil || ready != "" {
				name = ready
				return ready != "", "", err
			}
			last := "no pod yet"
			for _, p := range pods {
				waiting := containerWaiting(&p)
				last = fmt.Sprintf("pod %s %s, %s", p.Name, p.Status.Phase, waiting)
				if waiting == "ErrImagePull" || waiting == "ImagePullBackOff" || waiting == "ErrImageNeverPull" {
					return false, last, fmt.Errorf("the API relay's pod %s cannot get its image %s (%s): load or push it where the cluster's nodes pull from (make relay-image builds it; --relay-image names another)", p.Name, image, waiting)
				}
			}
			return false, last, nil
		})
	return name, err
}

// relayEndpoint waits until the relay's Service has a ready endpoint: an
// operator started before then is refused, and a controller-runtime
// manager exits on that at start.
func (e *Engine) relayEndpoint(ctx context.Context) error {
	return framework.PollFor(ctx, "a ready endpoint of the API relay's Service", relayEndpointWithin, 200*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var slices discoveryv1.EndpointSliceList
			if err := e.Client.List(ctx, &slices, client.InNamespace(e.operator.Namespace),
				client.MatchingLabels{discoveryv1.LabelServiceName: relayName}); err != nil {
				return false, "", err
			}
			for _, s := range slices.Items {
				for _, ep := range s.Endpoints {
					if ptr.Deref(ep.Conditions.Ready, false) {
						return true, "", nil
					}
				}
			}
			return false, fmt.Sprintf("%d EndpointSlices, no ready endpoint", len(slices.Items)), nil
		})
}

// readyRelayPod names a ready relay pod, or "".
func (e *Engine) readyRelayPod(ctx context.Context) (string, error) {
	ready, _, err := e.relayPods(ctx)
	return ready, err
}

// relayPods lists the relay's pods and names a ready one, not on its way
// out ("" when none is).
func (e *Engine) relayPods(ctx context.Context) (string, []corev1.Pod, error) {
	var pods corev1.PodList
	if err := e.Client.List(ctx, &pods, client.InNamespace(e.operator.Namespace), client.MatchingLabels(relayLabels())); err != nil {
		return "", nil, err
	}
	for _, p := range pods.Items {
		if framework.PodReady(&p) && p.DeletionTimestamp == nil {
			return p.Name, pods.Items, nil
		}
	}
	return "", pods.Items, nil
}

// stopRelay stops the tunnels and deletes the relay's objects.
func (e *Engine) stopRelay(ctx context.Context) error {
	if e.relay == nil {
		return nil
	}
	e.relay.stop()
	e.relay.stop = func() {}
	ns := e.relay.namespace
	meta := metav1.ObjectMeta{Namespace: ns, Name: relayName}
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	return errors.Join(
		client.IgnoreNotFound(e.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: meta}, bg)),
		client.IgnoreNotFound(e.Client.Delete(ctx, &corev1.Service{ObjectMeta: meta})))
}

// createOrReplace creates d, or replaces the spec of the one an earlier
// run left.
func (e *Engine) createOrReplace(ctx context.Context, d *appsv1.Deployment) error {
	err := e.Client.Create(ctx, d)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var old appsv1.Deployment
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(d), &old); err != nil {
		return err
	}
	old.Labels, old.Spec = d.Labels, d.Spec
	return e.Client.Update(ctx, &old)
}

// ensureNamespace creates ns unless it exists (the operator's manifests,
// applied later, may name it too).
func (e *Engine) ensureNamespace(ctx context.Context, ns string) error {
	err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s for the API relay: %w", ns, err)
	}
	return nil
}

// containerWaiting is why a pod's first waiting container waits, or "".
func containerWaiting(p *corev1.Pod) string {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil {
			return c.State.Waiting.Reason
		}
	}
	return ""
}

func relayLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": relayName, "app.kubernetes.io/managed-by": "gauntlet"}
}

// relayService is the address the operator's pods are rewired to: port
// 443, as the API server's own Service.
func relayService(ns string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: relayName, Labels: relayLabels()},
		Spec: corev1.ServiceSpec{
			Selector: relayLabels(),
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString("api")}},
		},
	}
}

// relayDeployment runs one relay pod, as the restricted Pod Security
// Standard allows and with no API credentials: it only splices bytes.
func relayDeployment(ns, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: relayName, Labels: relayLabels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: relayLabels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: relayLabels()},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "relay",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{"--listen=:" + strconv.Itoa(relayClientPort),
							"--tunnels=:" + strconv.Itoa(relayTunnelPort)},
						Ports: []corev1.ContainerPort{
							{Name: "api", ContainerPort: relayClientPort, Protocol: corev1.ProtocolTCP},
							{Name: "tunnels", ContainerPort: relayTunnelPort, Protocol: corev1.ProtocolTCP},
						},
						// A connection that says nothing is no tunnel: the
						// relay closes it.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("tunnels")}},
							PeriodSeconds: 2,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}
