package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// HubOnlyAnnotation keeps, on a v1alpha1 object, what only v1beta1 can say
// (spec.backup, an S3 restoreFrom, status.lastBackup) as JSON, so that an
// object read and written back through v1alpha1 loses none of it.
const HubOnlyAnnotation = "database.gauntlet.dev/v1beta1-fields"

// hubOnly is what v1beta1 says that v1alpha1 cannot.
type hubOnly struct {
	Backup        *dbv1.BackupSpec       `json:"backup,omitempty"`
	RestoreFromS3 *dbv1.S3SnapshotSource `json:"restoreFromS3,omitempty"`
	LastBackup    *dbv1.BackupStatus     `json:"lastBackup,omitempty"`
}

func (h hubOnly) empty() bool {
	return h.Backup == nil && h.RestoreFromS3 == nil && h.LastBackup == nil
}

var _ conversion.Convertible = &DatabaseCluster{}

// decodeHubOnly reads the annotation strictly: a field it does not know is
// a mistake to name, not something to drop without a word, and a value of
// the wrong type or form is named by its path in v1beta1's spec.
func decodeHubOnly(raw string, extra *hubOnly) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(extra)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("spec.%s: %w", typeErr.Field, err)
	}
	// metav1.Duration parses itself and says only what the value was.
	var loose struct {
		Backup struct {
			Retention struct {
				MaxAge *string `json:"maxAge"`
			} `json:"retention"`
		} `json:"backup"`
	}
	if json.Unmarshal([]byte(raw), &loose) == nil && loose.Backup.Retention.MaxAge != nil {
		if _, perr := time.ParseDuration(*loose.Backup.Retention.MaxAge); perr != nil {
			return fmt.Errorf("spec.backup.retention.maxAge: Invalid value: %q: not a duration such as 168h or 90m", *loose.Backup.Retention.MaxAge)
		}
	}
	return err
}

// ConvertTo converts this DatabaseCluster to the hub version, v1beta1:
// restoreFrom's claim and file move under restoreFrom.volume, and what the
// hub-only annotation holds comes back.
func (src *DatabaseCluster) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*dbv1.DatabaseCluster)
	if !ok {
		return fmt.Errorf("converting a v1alpha1 DatabaseCluster: the hub is a %T, not a v1beta1 DatabaseCluster", dstRaw)
	}
	in := src.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta
	var extra hubOnly
	if raw, found := dst.Annotations[HubOnlyAnnotation]; found {
		// Strictly: a field it does not know is a mistake to name, not
		// something to drop without a word.
		if err := decodeHubOnly(raw, &extra); err != nil {
			return fmt.Errorf("converting DatabaseCluster %s/%s to v1beta1: annotation %s is not valid: %w", in.Namespace, in.Name, HubOnlyAnnotation, err)
		}
		delete(dst.Annotations, HubOnlyAnnotation)
		if len(dst.Annotations) == 0 {
			dst.Annotations = nil
		}
	}

	dst.Spec = dbv1.DatabaseClusterSpec{
		Replicas:       in.Spec.Replicas,
		Image:          in.Spec.Image,
		Resources:      in.Spec.Resources,
		Storage:        dbv1.StorageSpec(in.Spec.Storage),
		DeletionPolicy: dbv1.DeletionPolicy(in.Spec.DeletionPolicy),
		Backup:         extra.Backup,
	}
	if r := in.Spec.RestoreFrom; r != nil {
		dst.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: r.ClaimName, File: r.File}}
	}
	if extra.RestoreFromS3 != nil {
		if dst.Spec.RestoreFrom == nil {
			dst.Spec.RestoreFrom = &dbv1.RestoreSource{}
		}
		dst.Spec.RestoreFrom.S3 = extra.RestoreFromS3
	}

	dst.Status = dbv1.DatabaseClusterStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		Replicas:           in.Status.Replicas,
		ReadyReplicas:      in.Status.ReadyReplicas,
		Conditions:         in.Status.Conditions,
		LastBackup:         extra.LastBackup,
	}
	if in.Status.Members != nil {
		dst.Status.Members = make([]dbv1.MemberStatus, len(in.Status.Members))
		for i, m := range in.Status.Members {
			dst.Status.Members[i] = dbv1.MemberStatus(m)
		}
	}
	if s := in.Status.LastSnapshot; s != nil {
		dst.Status.LastSnapshot = new(dbv1.SnapshotStatus(*s))
	}
	return nil
}

// ConvertFrom converts from the hub version, v1beta1, to this version:
// restoreFrom.volume becomes restoreFrom, and what v1alpha1 has no field for
// goes into the hub-only annotation.
func (dst *DatabaseCluster) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*dbv1.DatabaseCluster)
	if !ok {
		return fmt.Errorf("converting to a v1alpha1 DatabaseCluster: the hub is a %T, not a v1beta1 DatabaseCluster", srcRaw)
	}
	in := src.DeepCopy()
	dst.ObjectMeta = in.ObjectMeta

	extra := hubOnly{Backup: in.Spec.Backup, LastBackup: in.Status.LastBackup}
	dst.Spec = DatabaseClusterSpec{
		Replicas:       in.Spec.Replicas,
		Image:          in.Spec.Image,
		Resources:      in.Spec.Resources,
		Storage:        StorageSpec(in.Spec.Storage),
		DeletionPolicy: DeletionPolicy(in.Spec.DeletionPolicy),
	}
	if r := in.Spec.RestoreFrom; r != nil {
		if r.Volume != nil {
			dst.Spec.RestoreFrom = &RestoreSource{ClaimName: r.Volume.ClaimName, File: r.Volume.File}
		}
		extra.RestoreFromS3 = r.S3
	}

	dst.Status = DatabaseClusterStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		Replicas:           in.Status.Replicas,
		ReadyReplicas:      in.Status.ReadyReplicas,
		Conditions:         in.Status.Conditions,
	}
	if in.Status.Members != nil {
		dst.Status.Members = make([]MemberStatus, len(in.Status.Members))
		for i, m := range in.Status.Members {
			dst.Status.Members[i] = MemberStatus(m)
		}
	}
	if s := in.Status.LastSnapshot; s != nil {
		dst.Status.LastSnapshot = new(SnapshotStatus(*s))
	}

	if extra.empty() {
		return nil
	}
	raw, err := json.Marshal(extra)
	if err != nil {
		return fmt.Errorf("converting DatabaseCluster %s/%s to v1alpha1: %w", in.Namespace, in.Name, err)
	}
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	dst.Annotations[HubOnlyAnnotation] = string(raw)
	return nil
}
