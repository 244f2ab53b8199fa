package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var t0 = time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)

func TestFileNameRoundTrips(t *testing.T) {
	g := NewWithT(t)
	name := FileName("db", t0.Add(1500*time.Millisecond))
	g.Expect(name).To(Equal("db-backup-20261124T030001Z.db"))
	at, ok := ParseName("db", name)
	g.Expect(ok).To(BeTrue())
	g.Expect(at).To(Equal(t0.Add(time.Second)))
	for _, other := range []string{
		"db-20261124T030001Z.db",          // a final snapshot
		"dbx-backup-20261124T030001Z.db",  // another cluster's
		"db-backup-20261124T030001Z.part", // not a finished backup
		".db-backup-20261124T030001Z.db.tmp",
		"db-backup-yesterday.db",
	} {
		_, ok := ParseName("db", other)
		g.Expect(ok).To(BeFalse(), other)
	}
}

func TestExpired(t *testing.T) {
	hours := func(hs ...int) []Backup {
		var out []Backup
		for _, h := range hs {
			out = append(out, Backup{Name: FileName("db", t0.Add(-time.Duration(h)*time.Hour)), TakenAt: t0.Add(-time.Duration(h) * time.Hour)})
		}
		return out
	}
	for _, c := range []struct {
		name    string
		backups []Backup
		policy  Policy
		want    []Backup // oldest first
	}{
		{name: "nothing stored", policy: Policy{Count: 3}},
		{name: "within count", backups: hours(0, 1, 2), policy: Policy{Count: 3}},
		{name: "count drops the oldest", backups: hours(2, 0, 4, 1, 3), policy: Policy{Count: 3}, want: hours(4, 3)},
		{name: "count of one keeps only the newest", backups: hours(1, 0, 2), policy: Policy{Count: 1}, want: hours(2, 1)},
		{name: "max age", backups: hours(0, 10, 30, 50), policy: Policy{MaxAge: 24 * time.Hour}, want: hours(50, 30)},
		{name: "max age never drops the newest, however old", backups: hours(100, 200), policy: Policy{MaxAge: time.Hour}, want: hours(200)},
		{name: "either rule drops", backups: hours(0, 1, 2, 30), policy: Policy{Count: 3, MaxAge: 24 * time.Hour}, want: hours(30)},
		{name: "count stricter than age", backups: hours(0, 1, 2, 3), policy: Policy{Count: 2, MaxAge: 24 * time.Hour}, want: hours(3, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Expired(c.backups, c.policy, t0)
			g.Expect(got).To(Equal(c.want))
			newest := slices.MaxFunc(append(slices.Clone(c.backups), Backup{}), func(a, b Backup) int { return a.TakenAt.Compare(b.TakenAt) })
			g.Expect(got).NotTo(ContainElement(newest), "the newest backup is never expired")
		})
	}
}

// fakeStore is the narrow Store interface over a map, for failures a
// directory cannot be made to show.
type fakeStore struct {
	objects              map[string]string
	putErr, listErr, del error
}

func (f *fakeStore) List(context.Context) ([]string, error) {
	var names []string
	for n := range f.objects {
		names = append(names, n)
	}
	return names, f.listErr
}

func (f *fakeStore) Put(_ context.Context, name, path string) error {
	if f.putErr != nil {
		return f.putErr
	}
	b, err := os.ReadFile(path)
	f.objects[name] = string(b)
	return err
}

func (f *fakeStore) Delete(_ context.Context, name string) error {
	if f.del != nil {
		return f.del
	}
	delete(f.objects, name)
	return nil
}

func (f *fakeStore) Location(name string) string { return "fake://" + name }

func options(t *testing.T, s Store, verify func(string) (Status, error)) Options {
	return Options{
		Cluster: "db", Store: s, Policy: Policy{Count: 2}, WorkDir: t.TempDir(),
		Save:   func(_ context.Context, path string) error { return os.WriteFile(path, []byte("snapshot"), 0o600) },
		Verify: verify,
		Now:    func() time.Time { return t0 },
	}
}

func verified(string) (Status, error) {
	return Status{Hash: 7, Revision: 42, TotalKey: 3, TotalSize: 8}, nil
}

func TestRunStoresAVerifiedBackupThenAppliesRetention(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for _, h := range []int{1, 2, 3} {
		g.Expect(os.WriteFile(filepath.Join(dir, FileName("db", t0.Add(-time.Duration(h)*time.Hour))), []byte("old"), 0o600)).To(Succeed())
	}
	final := filepath.Join(dir, "db-20261101T000000Z.db")
	g.Expect(os.WriteFile(final, []byte("final"), 0o600)).To(Succeed())

	r := Run(t.Context(), options(t, Dir{Path: dir, Claim: "db-snapshots"}, verified))
	g.Expect(r.Message).To(BeEmpty())
	g.Expect(r).To(Equal(Report{
		Succeeded: true, Name: "db-backup-20261124T030000Z.db", Location: "pvc/db-snapshots/db-backup-20261124T030000Z.db",
		TakenAt: t0, Revision: 42, Hash: 7, TotalKeys: 3, SizeBytes: 8,
		Deleted: []string{FileName("db", t0.Add(-3*time.Hour)), FileName("db", t0.Add(-2*time.Hour))}, Kept: 2,
	}))
	names, err := Dir{Path: dir}.List(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(ConsistOf("db-backup-20261124T030000Z.db", FileName("db", t0.Add(-time.Hour)), "db-20261101T000000Z.db"),
		"retention trims backups only: the final snapshot stays, and no temporary file is left")
	g.Expect(os.ReadFile(filepath.Join(dir, r.Name))).To(Equal([]byte("snapshot")))
}

func TestRunStoresNothingThatDidNotVerify(t *testing.T) {
	g := NewWithT(t)
	s := &fakeStore{objects: map[string]string{FileName("db", t0.Add(-time.Hour)): "old"}}
	r := Run(t.Context(), options(t, s, func(string) (Status, error) {
		return Status{}, errors.New("snapshot file integrity check failed")
	}))
	g.Expect(r.Succeeded).To(BeFalse())
	g.Expect(r.Message).To(Equal("verifying the snapshot: snapshot file integrity check failed"))
	g.Expect(r.Step).To(Equal(StepVerify))
	g.Expect(s.objects).To(HaveLen(1), "nothing stored, nothing expired")

	r = Run(t.Context(), options(t, s, func(string) (Status, error) { return Status{}, nil }))
	g.Expect(r.Succeeded).To(BeFalse())
	g.Expect(r.Message).To(Equal("verifying the snapshot: the snapshot is unusable: revision 0, 0 bytes, hash 0"))
}

func TestRunReportsEachStepThatFails(t *testing.T) {
	g := NewWithT(t)
	o := options(t, &fakeStore{objects: map[string]string{}}, verified)
	o.Save = func(context.Context, string) error { return errors.New("connection refused") }
	r := Run(t.Context(), o)
	g.Expect(r.Message).To(Equal("saving the snapshot: connection refused"))
	g.Expect(r.Step).To(Equal(StepSave))

	s := &fakeStore{objects: map[string]string{}, putErr: errors.New("bucket not found")}
	r = Run(t.Context(), options(t, s, verified))
	g.Expect(r.Succeeded).To(BeFalse())
	g.Expect(r.Message).To(Equal("storing the snapshot: bucket not found"))
	g.Expect(r.Step).To(Equal(StepStore), "the operator names the bucket's fields for this step")

	// Stored, then retention fails: the backup counts, and the report says
	// what was left behind.
	s = &fakeStore{objects: map[string]string{FileName("db", t0.Add(-time.Hour)): "a", FileName("db", t0.Add(-2*time.Hour)): "b"}, del: errors.New("access denied")}
	r = Run(t.Context(), options(t, s, verified))
	g.Expect(r.Succeeded).To(BeTrue())
	g.Expect(r.Message).To(HavePrefix("stored, but retention could not delete db-backup-20261124T010000Z.db: access denied"))
}
