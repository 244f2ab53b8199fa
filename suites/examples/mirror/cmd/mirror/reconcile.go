package main

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// reconciler writes through the clients and reads from the informers'
// stores, as a client-go controller does.
type reconciler struct {
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	mirrors    cache.Indexer
	configMaps cache.Indexer
}

// reconcile makes the copies match the Mirror: each of <name>-0 ..
// <name>-(copies-1) holds spec.data and is owned by the Mirror; others
// labelled with it are deleted; then the status says how many are ready.
func (r *reconciler) reconcile(ctx context.Context, key string) error {
	m, err := object(r.mirrors, key)
	if err != nil || m == nil || m.GetDeletionTimestamp() != nil {
		return err // gone: the garbage collector deletes its copies
	}
	data, _, _ := unstructured.NestedStringMap(m.Object, "spec", "data")
	copies, _, _ := unstructured.NestedInt64(m.Object, "spec", "copies")
	want := map[string]bool{}
	ready := 0
	for i := range int(copies) {
		name := fmt.Sprintf("%s-%d", m.GetName(), i)
		want[name] = true
		ok, err := r.ensureCopy(ctx, m, name, data)
		if err != nil {
			return err
		}
		if ok {
			ready++
		}
	}
	existing, err := r.configMaps.ByIndex(cache.NamespaceIndex, m.GetNamespace())
	if err != nil {
		return err
	}
	for _, item := range existing {
		cm := item.(*corev1.ConfigMap)
		if cm.Labels[labelMirror] == m.GetName() && !want[cm.Name] && metav1.IsControlledBy(cm, m) {
			err := r.cs.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting copy %s: %w", cm.Name, err)
			}
		}
	}
	return r.writeStatus(ctx, m, ready, int(copies))
}

// ensureCopy creates or updates one copy; true when it already held the data.
func (r *reconciler) ensureCopy(ctx context.Context, m *unstructured.Unstructured, name string, data map[string]string) (bool, error) {
	item, exists, err := r.configMaps.GetByKey(m.GetNamespace() + "/" + name)
	if err != nil {
		return false, err
	}
	if !exists {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.GetNamespace(),
			Labels: map[string]string{labelMirror: m.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: m.GetAPIVersion(), Kind: m.GetKind(), Name: m.GetName(), UID: m.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}, Data: data}
		_, err := r.cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil // the informer had not seen it yet; the next pass compares it
		}
		return false, err
	}
	cm := item.(*corev1.ConfigMap)
	if !metav1.IsControlledBy(cm, m) {
		return false, fmt.Errorf("ConfigMap %s exists and is not this Mirror's", name)
	}
	if maps.Equal(cm.Data, data) {
		return true, nil
	}
	update := cm.DeepCopy()
	update.Data = data
	_, err = r.cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, update, metav1.UpdateOptions{})
	return false, err
}

// writeStatus records the generation seen and the Ready condition, when
// they changed.
func (r *reconciler) writeStatus(ctx context.Context, m *unstructured.Unstructured, ready, copies int) error {
	status, reason := "False", "Copying"
	if ready == copies {
		status, reason = "True", "AllCopied"
	}
	msg := strconv.Itoa(ready) + " of " + strconv.Itoa(copies) + " copies hold the data"
	old, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
	gen, _, _ := unstructured.NestedInt64(m.Object, "status", "observedGeneration")
	var was map[string]any
	if len(old) == 1 {
		was, _ = old[0].(map[string]any)
	}
	if gen == m.GetGeneration() && was != nil && was["status"] == status && was["message"] == msg {
		return nil
	}
	since := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	if was != nil && was["status"] == status {
		since, _ = was["lastTransitionTime"].(string)
	}
	u := m.DeepCopy()
	u.Object["status"] = map[string]any{
		"observedGeneration": m.GetGeneration(),
		"conditions": []any{map[string]any{"type": "Ready", "status": status, "reason": reason, "message": msg,
			"lastTransitionTime": since, "observedGeneration": m.GetGeneration()}},
	}
	_, err := r.dyn.Resource(mirrors).Namespace(m.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err // a conflict is retried with the newer Mirror
}
