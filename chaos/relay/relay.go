package relay

import (
	"context"
	"errors"
	"fmt"
	"log"
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
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
	"github.com/gauntlet-dev/gauntlet/framework/apiproxy"
	"github.com/gauntlet-dev/gauntlet/framework/apirelay"
)

// Image is the API relay's image this version of the harness speaks to
// (cmd/api-relay; make relay-image builds it).
var Image = fmt.Sprintf("gauntlet.dev/api-relay:v%d", apirelay.Version)

// Name names the relay's Deployment, Service and pods' label.
const Name = "gauntlet-api-relay"

// The relay's ports: the operator's connections, the harness's tunnels.
const (
	relayClientPort = 8443
	relayTunnelPort = 9443
)

// Options place a relay.
type Options struct {
	Config *rest.Config
	Client client.Client
	// Namespace is the operator's: its pods reach the relay's Service
	// there.
	Namespace string
	// Image is the relay's image (default Image), which the cluster's
	// nodes must have or pull.
	Image string
	// ProxyLog receives the proxy's errors; Logf a line per step.
	ProxyLog *log.Logger
	Logf     func(format string, args ...any)
}

// Relay is the in-cluster half of the API proxy's path when the cluster's
// pods cannot reach this machine, and the proxy it leads to.
type Relay struct {
	// Proxy is the API proxy on this machine's loopback.
	Proxy *apiproxy.Proxy
	// Address is where the operator's pods reach it: the relay's
	// Service, host:port.
	Address string

	o       Options
	tunnels *apirelay.Tunnels
	stop    context.CancelFunc
	local   atomic.Int32 // the port-forward's local port, 0 while none
}

// Start starts the API proxy on this machine's loopback and a relay in
// the cluster, in the operator's namespace: the operator's pods connect
// to the relay's Service, and the relay hands each connection to the
// proxy through tunnels opened here over a port-forward. TLS runs from
// the operator to the proxy (whose certificate names the Service's
// address); the relay only splices bytes. Once the proxy has started, the
// Relay is returned even with an error, for Stop and the proxy's Close.
func Start(ctx context.Context, o Options) (*Relay, error) {
	start := time.Now()
	if o.Image == "" {
		o.Image = Image
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	r := &Relay{o: o, stop: func() {}}
	ns := o.Namespace
	if err := r.ensureNamespace(ctx, ns); err != nil {
		return nil, err
	}
	svc := service(ns)
	if err := o.Client.Create(ctx, svc); apierrors.IsAlreadyExists(err) {
		// Left by an earlier run: it is ours, its address stays.
		err = o.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc)
		if err != nil {
			return nil, fmt.Errorf("the API relay's Service: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("the API relay's Service: %w", err)
	}
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if ip == nil {
		return nil, fmt.Errorf("the API relay's Service %s/%s has no cluster IP (%q)", ns, Name, svc.Spec.ClusterIP)
	}
	p, err := apiproxy.StartWith(o.Config, 0, apiproxy.Options{IPs: []net.IP{ip}, ErrorLog: o.ProxyLog})
	if err != nil {
		return nil, err
	}
	r.Proxy = p
	if err := r.createOrReplace(ctx, deployment(ns, o.Image)); err != nil {
		return r, fmt.Errorf("the API relay's Deployment: %w", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	r.tunnels = &apirelay.Tunnels{Dial: r.dial, Target: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port())), Logf: o.Logf}
	r.Address = net.JoinHostPort(ip.String(), strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	pod, err := r.readyPodWithin(ctx, o.Image)
	if err != nil {
		return r, err
	}
	if err := r.endpoint(ctx); err != nil {
		return r, err
	}
	pf, err := framework.ForwardPort(ctx, o.Config, ns, pod, relayTunnelPort)
	if err != nil {
		return r, fmt.Errorf("port-forward to the API relay's pod: %w", err)
	}
	r.local.Store(int32(pf.Local))
	go r.keepForwarding(rctx, pod, pf)
	go r.tunnels.Run(rctx)
	o.Logf("API proxy for the view faults on this machine, reached by the operator's pods through the relay %s/%s at %s (image %s, port-forwarded) in %s",
		ns, Name, r.Address, o.Image, time.Since(start).Round(time.Millisecond))
	return r, nil
}

// Stop stops the tunnels and deletes the relay's objects; the proxy is
// the caller's to close.
func (r *Relay) Stop(ctx context.Context) error {
	r.stop()
	r.stop = func() {}
	meta := metav1.ObjectMeta{Namespace: r.o.Namespace, Name: Name}
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	return errors.Join(
		client.IgnoreNotFound(r.o.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: meta}, bg)),
		client.IgnoreNotFound(r.o.Client.Delete(ctx, &corev1.Service{ObjectMeta: meta})))
}

// Connections is how many of the operator's connections the relay has
// carried to the proxy.
func (r *Relay) Connections() int64 {
	if r.tunnels == nil {
		return 0
	}
	return r.tunnels.Paired()
}

// dial opens a tunnel through the current port-forward.
func (r *Relay) dial(ctx context.Context) (net.Conn, error) {
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
func (r *Relay) keepForwarding(ctx context.Context, pod string, pf *framework.PortForward) {
	failing := false
	for ctx.Err() == nil {
		var err error
		if pf == nil {
			pf, err = framework.ForwardPort(ctx, r.o.Config, r.o.Namespace, pod, relayTunnelPort)
			if err != nil && !failing && ctx.Err() == nil {
				r.o.Logf("forwarding to the API relay's pod %s: %v (retrying every second)", pod, err)
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
			r.o.Logf("the port-forward to the API relay's pod %s ended; forwarding again", pod)
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
		if p, err := r.readyPod(ctx); err == nil && p != "" {
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

// readyPodWithin waits, relayReadyWithin at most, for a ready relay pod and names it. A pod that cannot
// start (its image is not on the nodes or in a registry they pull from)
// fails at once with the reason.
func (r *Relay) readyPodWithin(ctx context.Context, image string) (string, error) {
	var name string
	err := framework.PollFor(ctx, "the API relay's pod ready", relayReadyWithin, 500*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			ready, pods, err := r.pods(ctx)
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

// endpoint waits until the relay's Service has a ready endpoint: an
// operator started before then is refused, and a controller-runtime
// manager exits on that at start.
func (r *Relay) endpoint(ctx context.Context) error {
	return framework.PollFor(ctx, "a ready endpoint of the API relay's Service", relayEndpointWithin, 200*time.Millisecond,
		func(ctx context.Context) (bool, string, error) {
			var slices discoveryv1.EndpointSliceList
			if err := r.o.Client.List(ctx, &slices, client.InNamespace(r.o.Namespace),
				client.MatchingLabels{discoveryv1.LabelServiceName: Name}); err != nil {
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

// readyPod names a ready relay pod, or "".
func (r *Relay) readyPod(ctx context.Context) (string, error) {
	ready, _, err := r.pods(ctx)
	return ready, err
}

// pods lists the relay's pods and names a ready one, not on its way out
// ("" when none is).
func (r *Relay) pods(ctx context.Context) (string, []corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.o.Client.List(ctx, &pods, client.InNamespace(r.o.Namespace), client.MatchingLabels(relayLabels())); err != nil {
		return "", nil, err
	}
	for _, p := range pods.Items {
		if framework.PodReady(&p) && p.DeletionTimestamp == nil {
			return p.Name, pods.Items, nil
		}
	}
	return "", pods.Items, nil
}

// createOrReplace creates d, or replaces the spec of the one an earlier
// run left.
func (r *Relay) createOrReplace(ctx context.Context, d *appsv1.Deployment) error {
	err := r.o.Client.Create(ctx, d)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var old appsv1.Deployment
	if err := r.o.Client.Get(ctx, client.ObjectKeyFromObject(d), &old); err != nil {
		return err
	}
	old.Labels, old.Spec = d.Labels, d.Spec
	return r.o.Client.Update(ctx, &old)
}

// ensureNamespace creates ns unless it exists (the operator's manifests,
// applied later, may name it too).
func (r *Relay) ensureNamespace(ctx context.Context, ns string) error {
	err := r.o.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
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
	return map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/managed-by": "gauntlet"}
}

// service is the address the operator's pods are rewired to: port
// 443, as the API server's own Service.
func service(ns string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name, Labels: relayLabels()},
		Spec: corev1.ServiceSpec{
			Selector: relayLabels(),
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString("api")}},
		},
	}
}

// deployment runs one relay pod, as the restricted Pod Security
// Standard allows and with no API credentials: it only splices bytes.
func deployment(ns, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name, Labels: relayLabels()},
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
