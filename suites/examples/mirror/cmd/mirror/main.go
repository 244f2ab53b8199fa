// Command mirror is the third example operator: written with plain client-go
// (informers, a work queue, the dynamic client; no controller-runtime), so
// that the view tier is shown on an operator that shares none of the
// reference operator's libraries. A Mirror (example.gauntlet.dev/v1) copies
// spec.data into spec.copies ConfigMaps named <mirror>-<i>, each owned by
// it, and reports Ready once every copy holds the data.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// mirrors is the custom resource the operator reconciles.
var mirrors = schema.GroupVersionResource{Group: "example.gauntlet.dev", Version: "v1", Resource: "mirrors"}

// labelMirror marks each copy with the name of its Mirror.
const labelMirror = "example.gauntlet.dev/mirror"

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig; empty uses the in-cluster config")
	workers := flag.Int("workers", 2, "Mirrors reconciled at once")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *workers); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, kubeconfig string, workers int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 10*time.Minute)
	mirrorInformer := dynFactory.ForResource(mirrors).Informer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := mirrorInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelMirror }))
	cmInformer := factory.Core().V1().ConfigMaps().Informer()
	owner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			queue.Add(cm.Namespace + "/" + cm.Labels[labelMirror])
		}
	}
	if _, err := cmInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: owner, UpdateFunc: func(_, o any) { owner(o) }, DeleteFunc: owner,
	}); err != nil {
		return err
	}
	dynFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), mirrorInformer.HasSynced, cmInformer.HasSynced) {
		return fmt.Errorf("caches did not sync")
	}
	r := &reconciler{cs: cs, dyn: dyn, mirrors: mirrorInformer.GetIndexer(), configMaps: cmInformer.GetIndexer()}
	log.Printf("mirror operator started, %d workers", workers)
	for range workers {
		go func() {
			for process(ctx, queue, r) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// process reconciles one key from the queue; false once the queue shut down.
func process(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], r *reconciler) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	if err := r.reconcile(ctx, key); err != nil {
		log.Printf("reconciling %s: %v", key, err)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// object is an informer's item as unstructured, nil when absent.
func object(store cache.Indexer, key string) (*unstructured.Unstructured, error) {
	item, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		return nil, err
	}
	u, _ := item.(*unstructured.Unstructured)
	return u, nil
}
