// Package backup takes one scheduled backup of an etcd cluster: it saves a
// snapshot from a member, verifies it the way `etcdutl snapshot status` does
// (the same check as the final snapshot), stores it under a name that carries
// its time, and then applies the retention policy to what the destination
// holds. Only verified snapshots are ever stored under a backup name, so the
// newest backup is always a verified one, and retention never deletes it.
//
// The operator's backup Job runs this package through cmd/backup; the
// operator reads the Report from the Job's termination message.
package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// timeLayout is the time in a backup's name: sortable, UTC, to the second.
const timeLayout = "20060102T150405Z"

// Infix separates the cluster's name from the time in a backup's name; a
// final snapshot (<cluster>-<time>.db) never matches it.
const Infix = "-backup-"

// FileName is the name of cluster's backup taken at t.
func FileName(cluster string, t time.Time) string {
	return cluster + Infix + t.UTC().Format(timeLayout) + ".db"
}

// ParseName returns when the backup was taken, if name is one of cluster's
// backups.
func ParseName(cluster, name string) (time.Time, bool) {
	rest, found := strings.CutPrefix(name, cluster+Infix)
	if !found {
		return time.Time{}, false
	}
	stamp, found := strings.CutSuffix(rest, ".db")
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(timeLayout, stamp)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// Policy is a retention policy: keep the newest Count backups (0: no limit
// by count) and none older than MaxAge (0: no limit by age). The newest
// backup is kept whatever the policy says.
type Policy struct {
	Count  int
	MaxAge time.Duration
}

// Backup is one stored backup.
type Backup struct {
	Name    string
	TakenAt time.Time
}

// Expired returns the backups that p drops at now, oldest first. The newest
// backup is never among them.
func Expired(backups []Backup, p Policy, now time.Time) []Backup {
	sorted := slices.Clone(backups)
	slices.SortFunc(sorted, func(a, b Backup) int { return b.TakenAt.Compare(a.TakenAt) }) // newest first
	var drop []Backup
	for i, b := range sorted {
		switch {
		case i == 0:
		case p.Count > 0 && i >= p.Count:
			drop = append(drop, b)
		case p.MaxAge > 0 && now.Sub(b.TakenAt) > p.MaxAge:
			drop = append(drop, b)
		}
	}
	slices.Reverse(drop)
	return drop
}

// Store is where backups are kept: a directory on the cluster's snapshot
// claim, or a bucket.
type Store interface {
	// List returns the names of every object in the store.
	List(ctx context.Context) ([]string, error)
	// Put stores the file at path under name; the object appears complete
	// or not at all.
	Put(ctx context.Context, name, path string) error
	// Delete removes name.
	Delete(ctx context.Context, name string) error
	// Location names name for people and for spec.restoreFrom, for
	// example pvc/<claim>/<name> or s3://<bucket>/<key>.
	Location(name string) string
}

// Status is what verifying a snapshot file finds, as etcdutl reports it.
type Status struct {
	Hash      uint32
	Revision  int64
	TotalKey  int
	TotalSize int64
}

// Steps of a run, as a failed Report names the one that failed.
const (
	// StepSave is saving a snapshot from a member.
	StepSave = "save"
	// StepVerify is checking the saved snapshot.
	StepVerify = "verify"
	// StepStore is writing the snapshot to the destination: for a bucket,
	// where an unreachable endpoint, a missing bucket or wrong keys show.
	StepStore = "store"
)

// Report is the outcome of one run, written as JSON to the Job's
// termination message.
type Report struct {
	Succeeded bool `json:"succeeded"`
	// Step is the step that failed (StepSave, StepVerify, StepStore), when
	// the run did not succeed.
	Step      string    `json:"step,omitempty"`
	Name      string    `json:"name,omitempty"`
	Location  string    `json:"location,omitempty"`
	TakenAt   time.Time `json:"takenAt"`
	Revision  int64     `json:"revision,omitempty"`
	Hash      uint32    `json:"hash,omitempty"`
	TotalKeys int       `json:"totalKeys,omitempty"`
	SizeBytes int64     `json:"sizeBytes,omitempty"`
	// Deleted are the backups retention removed.
	Deleted []string `json:"deleted,omitempty"`
	// Kept is how many backups the store holds afterwards.
	Kept int `json:"kept,omitempty"`
	// Message says what failed; retention failing after a stored backup
	// leaves Succeeded true and says so here.
	Message string `json:"message,omitempty"`
}

// Options are one run's inputs.
type Options struct {
	// Cluster names the backups.
	Cluster string
	Store   Store
	Policy  Policy
	// WorkDir holds the snapshot while it is saved and verified.
	WorkDir string
	// Save writes a snapshot of the cluster to path.
	Save func(ctx context.Context, path string) error
	// Verify checks the file and reads its revision, hash and key count.
	Verify func(path string) (Status, error)
	// Now tells the time; time.Now when nil.
	Now func() time.Time
}

// Run takes, verifies and stores one backup, then applies retention. It
// always returns a Report; Succeeded says whether a verified backup was
// stored.
func Run(ctx context.Context, o Options) Report {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	taken := now().UTC().Truncate(time.Second)
	r := Report{Name: FileName(o.Cluster, taken), TakenAt: taken}
	fail := func(step, doing string, err error) Report {
		r.Step, r.Message = step, fmt.Sprintf("%s: %v", doing, err)
		return r
	}
	path := filepath.Join(o.WorkDir, "."+r.Name+".part")
	defer func() { _ = os.Remove(path) }()
	if err := o.Save(ctx, path); err != nil {
		return fail(StepSave, "saving the snapshot", err)
	}
	st, err := o.Verify(path)
	if err != nil {
		return fail(StepVerify, "verifying the snapshot", err)
	}
	// The final snapshot's rule: an empty cluster snapshots at revision 0
	// with no keys, which is valid; no bytes or no hash is not.
	if st.Revision < 0 || st.TotalSize <= 0 || st.Hash == 0 {
		return fail(StepVerify, "verifying the snapshot", fmt.Errorf("the snapshot is unusable: revision %d, %d bytes, hash %d", st.Revision, st.TotalSize, st.Hash))
	}
	r.Revision, r.Hash, r.TotalKeys, r.SizeBytes = st.Revision, st.Hash, st.TotalKey, st.TotalSize
	if err := o.Store.Put(ctx, r.Name, path); err != nil {
		return fail(StepStore, "storing the snapshot", err)
	}
	r.Succeeded, r.Location = true, o.Store.Location(r.Name)

	names, err := o.Store.List(ctx)
	if err != nil {
		r.Message = fmt.Sprintf("stored, but listing the backups for retention failed: %v", err)
		return r
	}
	var backups []Backup
	for _, n := range names {
		if t, ok := ParseName(o.Cluster, n); ok {
			backups = append(backups, Backup{Name: n, TakenAt: t})
		}
	}
	r.Kept = len(backups)
	for _, b := range Expired(backups, o.Policy, taken) {
		if b.Name == r.Name {
			continue // never the one just stored; Expired keeps the newest anyway
		}
		if err := o.Store.Delete(ctx, b.Name); err != nil {
			r.Message = fmt.Sprintf("stored, but retention could not delete %s: %v", b.Name, err)
			return r
		}
		r.Deleted = append(r.Deleted, b.Name)
		r.Kept--
	}
	return r
}

// Dir keeps backups as files in a directory: the cluster's snapshot claim,
// mounted in the Job.
type Dir struct {
	// Path is where the claim is mounted.
	Path string
	// Claim is the claim's name, for Location.
	Claim string
}

// List returns the directory's file names.
func (d Dir) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Put copies the file into the directory under a temporary name, syncs it,
// and renames it into place.
func (d Dir) Put(_ context.Context, name, path string) error {
	tmp := filepath.Join(d.Path, "."+name+".tmp")
	if err := copyFile(path, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(d.Path, name))
}

// Delete removes the file.
func (d Dir) Delete(_ context.Context, name string) error {
	return os.Remove(filepath.Join(d.Path, name))
}

// Location is pvc/<claim>/<name>.
func (d Dir) Location(name string) string { return "pvc/" + d.Claim + "/" + name }

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := out.ReadFrom(in); err != nil {
		return err
	}
	return out.Sync()
}
