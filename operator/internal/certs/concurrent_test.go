package certs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// secretRace makes n clients read the Secret before any of them writes it:
// each one's first Get of a Secret waits until all n have read theirs, so
// every client then writes on the same view and all but one lose the race.
type secretRace struct {
	n int

	mu      sync.Mutex
	read    int
	allRead chan struct{}
	lost    []error
}

func newSecretRace(n int) *secretRace {
	return &secretRace{n: n, allRead: make(chan struct{})}
}

func (r *secretRace) client(base client.WithWatch) client.Client {
	var once sync.Once
	record := func(obj client.Object, err error) {
		if _, ok := obj.(*corev1.Secret); ok && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			r.mu.Lock()
			r.lost = append(r.lost, err)
			r.mu.Unlock()
		}
	}
	return interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, ok := obj.(*corev1.Secret); ok {
				once.Do(func() {
					r.mu.Lock()
					if r.read++; r.read == r.n {
						close(r.allRead)
					}
					r.mu.Unlock()
					select {
					case <-r.allRead:
					case <-time.After(10 * time.Second):
					}
				})
			}
			return err
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			record(obj, err)
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			record(obj, err)
			return err
		},
	})
}

// ensureAll runs Ensure of every manager at once and expects all to succeed.
func ensureAll(ctx context.Context, g Gomega, managers []*Manager) {
	errs := make([]error, len(managers))
	var wg sync.WaitGroup
	for i, m := range managers {
		wg.Go(func() { errs[i] = m.Ensure(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		g.Expect(err).NotTo(HaveOccurred(), "manager %d", i)
	}
}

func TestConcurrentEnsureConverges(t *testing.T) {
	f := newFixture(t)
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	opts := []Options{f.options(t), f.options(t)}

	// Both replicas find no Secret and create one: one create wins, the
	// other replica adopts what the winner wrote.
	race := newSecretRace(2)
	var managers []*Manager
	for _, o := range opts {
		o.Clock = clk
		m, err := New(race.client(apiClient), o)
		g.Expect(err).NotTo(HaveOccurred())
		managers = append(managers, m)
	}
	ensureAll(f.ctx, g, managers)
	g.Expect(race.lost).To(ConsistOf(Satisfy(apierrors.IsAlreadyExists)), "exactly one create lost")
	created := f.expectConsistent(g, opts[0].CertDir)
	g.Expect(f.expectConsistent(g, opts[1].CertDir).ResourceVersion).To(Equal(created.ResourceVersion))

	// Both find the serving certificate due and update the Secret: one
	// update wins, the other conflicts and adopts it.
	clk.Step(270 * day)
	race = newSecretRace(2)
	for i, o := range opts {
		o.Clock = clk
		m, err := New(race.client(apiClient), o)
		g.Expect(err).NotTo(HaveOccurred())
		managers[i] = m
	}
	ensureAll(f.ctx, g, managers)
	g.Expect(race.lost).To(ConsistOf(Satisfy(apierrors.IsConflict)), "exactly one update lost")
	renewed := f.expectConsistent(g, opts[0].CertDir)
	g.Expect(f.expectConsistent(g, opts[1].CertDir).ResourceVersion).To(Equal(renewed.ResourceVersion))
	g.Expect(renewed.Data[KeyTLSCert]).NotTo(Equal(created.Data[KeyTLSCert]))
	g.Expect(renewed.Data[KeyCACert]).To(Equal(created.Data[KeyCACert]))

	// Without a barrier, a few more rounds on fresh namespaces.
	for round := range 3 {
		t.Run(fmt.Sprintf("free race %d", round), func(t *testing.T) {
			f := newFixture(t)
			g := NewWithT(t)
			opts := []Options{f.options(t), f.options(t)}
			ensureAll(f.ctx, g, []*Manager{f.manager(t, opts[0]), f.manager(t, opts[1])})
			s := f.expectConsistent(g, opts[0].CertDir)
			g.Expect(f.expectConsistent(g, opts[1].CertDir).ResourceVersion).To(Equal(s.ResourceVersion))
		})
	}
}
