package memcached

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Finalizer holds a Memcached until its Deployment is deleted.
const Finalizer = "cache.example.com/cleanup"

// Port is memcached's port.
const Port = 11211

// Reconciler runs a Memcached as a Deployment of the same name.
//
// +kubebuilder:object:generate=false
type Reconciler struct {
	Client client.Client
	// Clock stamps condition transitions.
	Clock clock.PassiveClock

	// finalize runs while the Memcached is being deleted: cleanup, unless
	// a test swaps in a variant (sim_test.go's deliberately buggy one).
	finalize func(context.Context, *Memcached) error
}

// SetupWithManager registers the controller; the simulation's Watches mirror it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("memcached").
		For(&Memcached{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Complete(r)
}

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=update
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete

// Reconcile makes the Deployment match the Memcached and reports on it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	m := &Memcached{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		finalize := r.cleanup
		if r.finalize != nil {
			finalize = r.finalize
		}
		return ctrl.Result{}, finalize(ctx, m)
	}
	if controllerutil.AddFinalizer(m, Finalizer) {
		if err := r.Client.Update(ctx, m); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}

	var observed *appsv1.Deployment
	defer func() {
		if err := r.writeStatus(ctx, m, observed, retErr); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		return r.mutateDeployment(m, dep)
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the deployment: %w", err)
	}
	observed = dep
	return ctrl.Result{}, nil
}

// cleanup deletes the Deployment, then releases the finalizer.
func (r *Reconciler) cleanup(ctx context.Context, m *Memcached) error {
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		return nil
	}
	if err := r.deleteDeployment(ctx, m); err != nil {
		return err
	}
	return r.removeFinalizer(ctx, m)
}

func (r *Reconciler) deleteDeployment(ctx context.Context, m *Memcached) error {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
	if err := r.Client.Delete(ctx, dep); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the deployment: %w", err)
	}
	return nil
}

func (r *Reconciler) removeFinalizer(ctx context.Context, m *Memcached) error {
	controllerutil.RemoveFinalizer(m, Finalizer)
	if err := r.Client.Update(ctx, m); err != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	return nil
}

// mutateDeployment sets the fields this operator owns and leaves the rest
// (defaults, other tools' labels) alone, so a converged pass writes nothing.
func (r *Reconciler) mutateDeployment(m *Memcached, dep *appsv1.Deployment) error {
	labels := map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": m.Name}
	dep.Spec.Replicas = ptr.To(m.Spec.Size)
	dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	if dep.Spec.Template.Labels == nil {
		dep.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range labels {
		dep.Spec.Template.Labels[k] = v
	}
	containers := &dep.Spec.Template.Spec.Containers
	i := 0
	for i < len(*containers) && (*containers)[i].Name != "memcached" {
		i++
	}
	if i == len(*containers) {
		*containers = append(*containers, corev1.Container{Name: "memcached"})
	}
	c := &(*containers)[i]
	c.Image = m.Spec.Image
	// Set, not left to the API server: it defaults the policy from the
	// first image's tag when the Deployment is made and never again, so a
	// Deployment whose image changed would keep the policy of the image it
	// was made with, unlike one made with the new image.
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.Args = []string{"--memory-limit=64", "--verbose"}
	c.Ports = []corev1.ContainerPort{{Name: "memcached", ContainerPort: Port, Protocol: corev1.ProtocolTCP}}
	// The restricted Pod Security Standard: the image runs as a numeric
	// non-root user, without privileges.
	c.SecurityContext = &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	// Ready means memcached accepts connections: Available counts on it.
	// Every field is set, defaults included, so a converged pass writes nothing.
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(Port)}},
		PeriodSeconds:    2,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 2,
	}
	return controllerutil.SetControllerReference(m, dep, r.Client.Scheme())
}

// writeStatus computes the status once per pass from what the pass observed
// and writes it only if it changed. observedGeneration moves only on success.
func (r *Reconciler) writeStatus(ctx context.Context, m *Memcached, dep *appsv1.Deployment, passErr error) error {
	st := m.Status.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	if dep != nil {
		setAvailable(&st.Conditions, m.Spec.Size, dep, m.Generation, now)
		setProgressing(&st.Conditions, m.Spec.Size, dep, m.Generation, now)
	}
	for _, t := range []string{ConditionAvailable, ConditionProgressing} {
		if meta.FindStatusCondition(st.Conditions, t) == nil { // not observed yet: Unknown, in a fixed order
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionUnknown,
				Reason: ReasonDeploymentNotObserved, ObservedGeneration: m.Generation, LastTransitionTime: now})
		}
	}
	setDegraded(&st.Conditions, passErr, m.Generation, now)
	if passErr == nil {
		st.ObservedGeneration = m.Generation
	}
	if equality.Semantic.DeepEqual(*st, m.Status) {
		return nil
	}
	m.Status = *st
	if err := r.Client.Status().Update(ctx, m); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	return nil
}

func setAvailable(conds *[]metav1.Condition, size int32, dep *appsv1.Deployment, gen int64, now metav1.Time) {
	c := metav1.Condition{Type: ConditionAvailable, Status: metav1.ConditionFalse, Reason: ReasonReplicasNotReady,
		ObservedGeneration: gen, LastTransitionTime: now,
		Message: fmt.Sprintf("%d of %d replicas ready", dep.Status.ReadyReplicas, size)}
	if dep.Status.ReadyReplicas == size {
		c.Status, c.Reason = metav1.ConditionTrue, ReasonReplicasReady
	}
	meta.SetStatusCondition(conds, c)
}

func setProgressing(conds *[]metav1.Condition, size int32, dep *appsv1.Deployment, gen int64, now metav1.Time) {
	s := dep.Status
	c := metav1.Condition{Type: ConditionProgressing, Status: metav1.ConditionFalse, Reason: ReasonRolloutComplete,
		ObservedGeneration: gen, LastTransitionTime: now}
	if s.ObservedGeneration < dep.Generation || s.Replicas != size || s.UpdatedReplicas != size || s.ReadyReplicas != size {
		c.Status, c.Reason = metav1.ConditionTrue, ReasonRollingOut
		c.Message = fmt.Sprintf("%d of %d replicas updated, %d ready", s.UpdatedReplicas, size, s.ReadyReplicas)
	}
	meta.SetStatusCondition(conds, c)
}

func setDegraded(conds *[]metav1.Condition, passErr error, gen int64, now metav1.Time) {
	c := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonReconciled,
		ObservedGeneration: gen, LastTransitionTime: now}
	if passErr != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonReconcileFailed, passErr.Error()
	}
	meta.SetStatusCondition(conds, c)
}
