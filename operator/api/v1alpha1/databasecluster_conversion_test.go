package v1alpha1_test

import (
	"math/rand"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	dbv1alpha1 "github.com/gauntlet-dev/gauntlet/operator/api/v1alpha1"
	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// fuzzRounds objects are filled at random for each direction.
const fuzzRounds = 2000

// hubFuzzerFuncs keep hub objects to what admission accepts where the
// conversion depends on it: a restoreFrom names exactly one source.
func hubFuzzerFuncs(_ serializer.CodecFactory) []any {
	return []any{
		func(r *dbv1.RestoreSource, c randfill.Continue) {
			c.FillNoCustom(r)
			if c.Bool() {
				r.S3 = nil
				if r.Volume == nil {
					r.Volume = &dbv1.VolumeSnapshotSource{}
					c.Fill(r.Volume)
				}
			} else {
				r.Volume = nil
				if r.S3 == nil {
					r.S3 = &dbv1.S3SnapshotSource{}
					c.Fill(r.S3)
				}
			}
		},
	}
}

func newFiller(seed int64) *randfill.Filler {
	codecs := serializer.NewCodecFactory(runtime.NewScheme())
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, hubFuzzerFuncs), rand.NewSource(seed), codecs)
}

// TestFuzzSpokeHubSpoke: any v1alpha1 object survives v1alpha1 → v1beta1 →
// v1alpha1 unchanged.
func TestFuzzSpokeHubSpoke(t *testing.T) {
	f := newFiller(1)
	for i := range fuzzRounds {
		in := &dbv1alpha1.DatabaseCluster{}
		f.Fill(in)
		hub := &dbv1.DatabaseCluster{}
		if err := in.ConvertTo(hub); err != nil {
			t.Fatalf("round %d: ConvertTo: %v", i, err)
		}
		out := &dbv1alpha1.DatabaseCluster{}
		if err := out.ConvertFrom(hub); err != nil {
			t.Fatalf("round %d: ConvertFrom: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("round %d: v1alpha1 → v1beta1 → v1alpha1 changed the object:\n%s", i, diff.Diff(in, out))
		}
	}
}

// TestFuzzHubSpokeHub: any v1beta1 object survives v1beta1 → v1alpha1 →
// v1beta1 unchanged, including what only v1beta1 has.
func TestFuzzHubSpokeHub(t *testing.T) {
	f := newFiller(2)
	sawHubOnly := 0
	for i := range fuzzRounds {
		in := &dbv1.DatabaseCluster{}
		f.Fill(in)
		spoke := &dbv1alpha1.DatabaseCluster{}
		if err := spoke.ConvertFrom(in); err != nil {
			t.Fatalf("round %d: ConvertFrom: %v", i, err)
		}
		if _, found := spoke.Annotations[dbv1alpha1.HubOnlyAnnotation]; found {
			sawHubOnly++
		}
		out := &dbv1.DatabaseCluster{}
		if err := spoke.ConvertTo(out); err != nil {
			t.Fatalf("round %d: ConvertTo: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("round %d: v1beta1 → v1alpha1 → v1beta1 changed the object:\n%s", i, diff.Diff(in, out))
		}
	}
	// The fuzzer must have exercised the annotation, or the test proves little.
	if sawHubOnly < fuzzRounds/4 {
		t.Fatalf("only %d of %d hub objects carried v1beta1-only fields", sawHubOnly, fuzzRounds)
	}
	t.Logf("%d of %d hub objects carried v1beta1-only fields through v1alpha1", sawHubOnly, fuzzRounds)
}

// TestConversionMovesRestoreFrom: the one field v1beta1 restructures keeps
// its meaning, and what v1alpha1 cannot hold goes into the annotation, not
// into a v1alpha1 field.
func TestConversionMovesRestoreFrom(t *testing.T) {
	g := NewWithT(t)
	alpha := &dbv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Annotations: map[string]string{"keep": "me"}},
		Spec: dbv1alpha1.DatabaseClusterSpec{
			Replicas: ptr.To[int32](3), Image: "etcd:v3.6.16",
			Storage:     dbv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			RestoreFrom: &dbv1alpha1.RestoreSource{ClaimName: "old-snapshots", File: "old.db"},
		},
	}
	hub := &dbv1.DatabaseCluster{}
	g.Expect(alpha.ConvertTo(hub)).To(Succeed())
	g.Expect(hub.Spec.RestoreFrom).To(Equal(&dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: "old-snapshots", File: "old.db"}}))
	g.Expect(hub.Annotations).To(Equal(map[string]string{"keep": "me"}))

	hub.Spec.Backup = &dbv1.BackupSpec{
		Schedule:    "@hourly",
		Retention:   dbv1.BackupRetention{Count: ptr.To[int32](3)},
		Destination: dbv1.BackupDestination{Volume: &dbv1.VolumeDestination{}},
	}
	back := &dbv1alpha1.DatabaseCluster{}
	g.Expect(back.ConvertFrom(hub)).To(Succeed())
	g.Expect(back.Spec.RestoreFrom).To(Equal(alpha.Spec.RestoreFrom))
	g.Expect(back.Annotations).To(HaveKeyWithValue(dbv1alpha1.HubOnlyAnnotation,
		`{"backup":{"schedule":"@hourly","retention":{"count":3},"destination":{"volume":{}}}}`))
	g.Expect(back.Annotations).To(HaveKeyWithValue("keep", "me"))

	// A damaged annotation is an error naming it, not a silent loss.
	back.Annotations[dbv1alpha1.HubOnlyAnnotation] = "{"
	g.Expect(back.ConvertTo(&dbv1.DatabaseCluster{})).To(MatchError(ContainSubstring(dbv1alpha1.HubOnlyAnnotation)))
	// So is a field it does not know, at any depth: never dropped quietly.
	back.Annotations[dbv1alpha1.HubOnlyAnnotation] = `{"backup":{"schedule":"@hourly","retension":{"count":3}}}`
	g.Expect(back.ConvertTo(&dbv1.DatabaseCluster{})).To(MatchError(And(
		ContainSubstring(dbv1alpha1.HubOnlyAnnotation), ContainSubstring(`unknown field "retension"`))))
}
