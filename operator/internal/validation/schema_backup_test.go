package validation

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// withS3Backups gives c backups to a bucket, then lets mutate change them.
func withS3Backups(mutate func(*dbv1.BackupSpec)) func(*dbv1.DatabaseCluster) {
	return func(c *dbv1.DatabaseCluster) {
		c.Spec.Backup = &dbv1.BackupSpec{
			Schedule:  "@daily",
			Retention: dbv1.BackupRetention{Count: ptr.To[int32](7)},
			Destination: dbv1.BackupDestination{S3: &dbv1.S3Bucket{
				Endpoint: "https://s3.example.com:9000", Bucket: "etcd-backups", Prefix: "clusters/prod/",
				CredentialsSecret: dbv1.SecretReference{Name: "s3-keys"},
			}},
		}
		mutate(c.Spec.Backup)
	}
}

func bucket(name string) func(*dbv1.BackupSpec) {
	return func(b *dbv1.BackupSpec) { b.Destination.S3.Bucket = name }
}

func prefix(p string) func(*dbv1.BackupSpec) {
	return func(b *dbv1.BackupSpec) { b.Destination.S3.Prefix = p }
}

func endpoint(e string) func(*dbv1.BackupSpec) {
	return func(b *dbv1.BackupSpec) { b.Destination.S3.Endpoint = e }
}

// TestClusterSchemaRefusesBackupsThatCannotRun: the bucket, prefix and
// endpoint rules, each refused with the full path, the value given and what
// would be accepted.
func TestClusterSchemaRefusesBackupsThatCannotRun(t *testing.T) {
	s, err := ClusterSchema("v1beta1")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	const (
		bucketPath   = `spec.backup.destination.s3.bucket: Invalid value: `
		prefixPath   = `spec.backup.destination.s3.prefix: Invalid value: `
		endpointPath = `spec.backup.destination.s3.endpoint: Invalid value: `
	)
	cases := []struct {
		name   string
		mutate func(*dbv1.BackupSpec)
		want   string // the one error; "": valid
	}{
		{name: "sample", mutate: func(*dbv1.BackupSpec) {}},
		{name: "bucket with dots and digits", mutate: bucket("backups.example.com-2")},
		{name: "bucket of three", mutate: bucket("a1b")},
		{name: "bucket like an IP with a letter", mutate: bucket("192.168.5.4a")},
		{name: "bucket with xn-- inside", mutate: bucket("my-xn--bucket")},
		{name: "bucket too short", mutate: bucket("ab"), want: bucketPath + `"ab": spec.backup.destination.s3.bucket in body should be at least 3 chars long`},
		{name: "bucket uppercase", mutate: bucket("Backups"), want: bucketPath + `"Backups": bucket must be an S3 bucket name`},
		{name: "bucket ends with a period", mutate: bucket("backups."), want: bucketPath + `"backups.": bucket must be an S3 bucket name`},
		{name: "bucket with two periods", mutate: bucket("my..backups"), want: bucketPath + `"my..backups": bucket must not contain two adjacent periods or a period next to a hyphen`},
		{name: "bucket with period hyphen", mutate: bucket("my.-backups"), want: bucketPath + `"my.-backups": bucket must not contain two adjacent periods`},
		{name: "bucket with hyphen period", mutate: bucket("my-.backups"), want: bucketPath + `"my-.backups": bucket must not contain two adjacent periods`},
		{name: "bucket as an IP address", mutate: bucket("192.168.5.4"), want: bucketPath + `"192.168.5.4": bucket must not be formatted as an IP address (such as 192.168.5.4)`},
		{name: "bucket xn--", mutate: bucket("xn--backups"), want: bucketPath + `"xn--backups": bucket must not start with a prefix S3 reserves: xn--, sthree- or amzn-s3-demo-`},
		{name: "bucket sthree-", mutate: bucket("sthree-configurator"), want: bucketPath + `"sthree-configurator": bucket must not start with a prefix S3 reserves`},
		{name: "bucket -s3alias", mutate: bucket("backups-s3alias"), want: bucketPath + `"backups-s3alias": bucket must not end with a suffix S3 reserves: -s3alias, --ol-s3, .mrap, --x-s3 or --table-s3`},
		{name: "bucket --ol-s3", mutate: bucket("backups--ol-s3"), want: bucketPath + `"backups--ol-s3": bucket must not end with a suffix S3 reserves`},

		{name: "prefix without a slash", mutate: prefix("prod")},
		{name: "prefix with dots in names", mutate: prefix("a.b/..c/d../.e/")},
		{name: "prefix absolute", mutate: prefix("/backups/"), want: prefixPath + `"/backups/": prefix must not start with '/': keys are relative to the bucket, for example clusters/prod/`},
		{name: "prefix dot-dot first", mutate: prefix("../x"), want: prefixPath + `"../x": prefix must not hold a '.' or '..' segment, for example clusters/prod/`},
		{name: "prefix dot-dot inside", mutate: prefix("a/../b"), want: prefixPath + `"a/../b": prefix must not hold a '.' or '..' segment`},
		{name: "prefix dot-dot alone", mutate: prefix(".."), want: prefixPath + `"..": prefix must not hold a '.' or '..' segment`},
		{name: "prefix dot segment", mutate: prefix("a/./b/"), want: prefixPath + `"a/./b/": prefix must not hold a '.' or '..' segment`},
		{name: "prefix empty segment", mutate: prefix("a//b"), want: prefixPath + `"a//b": prefix must not hold an empty segment ('//'), for example clusters/prod/`},

		{name: "endpoint http with a trailing slash", mutate: endpoint("http://minio.backup.svc:9000/")},
		{name: "endpoint IPv6", mutate: endpoint("https://[fd00::1]:9000")},
		{name: "endpoint without a scheme", mutate: endpoint("s3.example.com"), want: endpointPath + `"s3.example.com": endpoint must be an http:// or https:// URL with a host, for example https://s3.example.com:9000`},
		{name: "endpoint without a host", mutate: endpoint("https:///backups"), want: endpointPath + `"https:///backups": endpoint must be an http:// or https:// URL with a host`},
		{name: "endpoint ftp", mutate: endpoint("ftp://s3.example.com"), want: endpointPath + `"ftp://s3.example.com": endpoint must be an http:// or https:// URL with a host`},
		{name: "endpoint with a user", mutate: endpoint("https://admin:secret@s3.example.com"), want: endpointPath + `"https://admin:secret@s3.example.com": endpoint must hold only a scheme, a host and an optional port, for example https://s3.example.com:9000: no user name or password (the keys come from credentialsSecret), path, query or fragment`},
		{name: "endpoint with a path", mutate: endpoint("https://s3.example.com/backups"), want: endpointPath + `"https://s3.example.com/backups": endpoint must hold only a scheme, a host and an optional port`},
		{name: "endpoint with a query", mutate: endpoint("https://s3.example.com?region=eu"), want: endpointPath + `"https://s3.example.com?region=eu": endpoint must hold only a scheme, a host and an optional port`},
		{name: "endpoint with a fragment", mutate: endpoint("https://s3.example.com#x"), want: endpointPath + `"https://s3.example.com#x": endpoint must be an http:// or https:// URL with a host`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := s.Validate(t.Context(), cluster(withS3Backups(tc.mutate)), nil)
			if tc.want == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			g.Expect(errs[0].Error()).To(HavePrefix(tc.want))
		})
	}
}

// TestClusterSchemaMaxAge: a malformed maxAge is refused as such, naming the
// value, and never reaches the CEL duration conversion.
func TestClusterSchemaMaxAge(t *testing.T) {
	s, err := ClusterSchema("v1beta1")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	const (
		path      = `spec.backup.retention.maxAge: Invalid value: `
		malformed = `maxAge must be a duration in hours, minutes and seconds, for example 168h or 1h30m`
		short     = `maxAge must be at least 1m, for example 168h`
	)
	for _, c := range []struct {
		maxAge string
		want   string // "": valid
	}{
		{maxAge: "168h"},
		{maxAge: "1m"},
		{maxAge: "1h30m"},
		{maxAge: "1.5h"},
		{maxAge: ".5h"},
		{maxAge: "90s"},
		{maxAge: "+2h"},
		{maxAge: (168 * time.Hour).String()}, // what a typed client writes: 168h0m0s
		{maxAge: (time.Minute + 500*time.Millisecond).String()},
		{maxAge: "999999h9999999m999999999.999s"}, // the largest whole numbers the format allows: within a Duration
		{maxAge: "59s", want: short},
		{maxAge: "0", want: short},
		{maxAge: "-1h", want: short},
		{maxAge: "10 days", want: malformed},
		{maxAge: "7d", want: malformed},
		{maxAge: "", want: malformed},
		{maxAge: "-", want: malformed},
		{maxAge: ".h", want: malformed},
		{maxAge: "1h1h", want: malformed},
		{maxAge: "30m1h", want: malformed},
		{maxAge: "100ms", want: malformed},
		{maxAge: "9999999h", want: malformed}, // would overflow a Duration
		{maxAge: "P7D", want: malformed},
	} {
		t.Run(c.maxAge, func(t *testing.T) {
			g := NewWithT(t)
			u := unstructuredCluster(t, withS3Backups(func(*dbv1.BackupSpec) {}))
			g.Expect(unstructured.SetNestedField(u.Object, c.maxAge, "spec", "backup", "retention", "maxAge")).To(Succeed())
			errs := s.Validate(t.Context(), u, nil)
			if c.want == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			g.Expect(errs[0].Error()).To(Equal(path + `"` + c.maxAge + `": ` + c.want))
			if c.want == short {
				return
			}
			_, err := time.ParseDuration(c.maxAge)
			if err == nil {
				g.Expect(c.maxAge).To(Or(Equal("1h1h"), Equal("30m1h"), Equal("100ms")), "valid Go durations the format refuses")
			}
		})
	}
	// Every value the format admits is a Duration the CEL rule can convert.
	g := NewWithT(t)
	for _, v := range []string{"0", "+0", "-0", "1.h", "0.0000000000000000000001s", "999999.999999999h9999999.9999999m999999999.999999999s"} {
		_, err := time.ParseDuration(v)
		g.Expect(err).NotTo(HaveOccurred(), v)
		u := unstructuredCluster(t, withS3Backups(func(*dbv1.BackupSpec) {}))
		g.Expect(unstructured.SetNestedField(u.Object, v, "spec", "backup", "retention", "maxAge")).To(Succeed())
		for _, e := range s.Validate(t.Context(), u, nil) {
			g.Expect(e.Error()).NotTo(ContainSubstring("evaluating rule"), v)
		}
	}
}

// unstructuredCluster is cluster(mutate) as the API server would see it, so
// that a test can set a field to what the typed struct cannot hold.
func unstructuredCluster(t *testing.T, mutate func(*dbv1.DatabaseCluster)) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cluster(mutate))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &unstructured.Unstructured{Object: m}
}

// TestClusterSchemaObjectMessages: rules on objects, whose value the API
// server does not print, say what was given.
func TestClusterSchemaObjectMessages(t *testing.T) {
	s, err := ClusterSchema("v1beta1")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, c := range []struct {
		name   string
		mutate func(*dbv1.DatabaseCluster)
		want   string
	}{
		{name: "both destinations", mutate: withS3Backups(func(b *dbv1.BackupSpec) { b.Destination.Volume = &dbv1.VolumeDestination{} }),
			want: "spec.backup.destination: Invalid value: destination needs exactly one of volume or s3, but both are set"},
		{name: "no destination", mutate: withS3Backups(func(b *dbv1.BackupSpec) { b.Destination.S3 = nil }),
			want: "spec.backup.destination: Invalid value: destination needs exactly one of volume or s3, but neither is set"},
		{name: "empty retention", mutate: withS3Backups(func(b *dbv1.BackupSpec) { b.Retention = dbv1.BackupRetention{} }),
			want: "spec.backup.retention: Invalid value: retention needs count, maxAge or both, but neither is set"},
		{name: "no restore source", mutate: func(c *dbv1.DatabaseCluster) { c.Spec.RestoreFrom = &dbv1.RestoreSource{} },
			want: "spec.restoreFrom: Invalid value: restoreFrom needs exactly one of volume or s3, but neither is set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := s.Validate(t.Context(), cluster(c.mutate), nil)
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			g.Expect(errs[0].Error()).To(ContainSubstring(c.want))
		})
	}
}

// TestClusterSchemaRestoreFromIsForCreation: adding or removing restoreFrom
// later is refused at spec.restoreFrom, saying which and what to do.
func TestClusterSchemaRestoreFromIsForCreation(t *testing.T) {
	g := NewWithT(t)
	s, err := ClusterSchema("v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	plain := cluster(nil)
	restored := cluster(func(c *dbv1.DatabaseCluster) {
		c.Spec.RestoreFrom = &dbv1.RestoreSource{Volume: &dbv1.VolumeSnapshotSource{ClaimName: "old-snapshots", File: "old.db"}}
	})
	g.Expect(s.Validate(t.Context(), restored, nil)).To(BeEmpty())
	g.Expect(s.Validate(t.Context(), restored, restored)).To(BeEmpty())

	errs := s.Validate(t.Context(), restored, plain)
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Error()).To(Equal("spec.restoreFrom: Forbidden: restoreFrom cannot be added after the cluster is created: " +
		"a cluster is restored only when it is created, so create a new cluster with restoreFrom set"))

	errs = s.Validate(t.Context(), plain, restored)
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Error()).To(Equal("spec.restoreFrom: Forbidden: restoreFrom cannot be removed after the cluster is created: " +
		"keep the restoreFrom it was created with"))
}

// TestClusterSchemaStorageIsImmutable: each change is refused at the field
// that changed, saying what to keep.
func TestClusterSchemaStorageIsImmutable(t *testing.T) {
	s, err := ClusterSchema("v1beta1")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	const immutable = "storage is immutable, because the volume claim templates of a StatefulSet cannot change after creation: "
	standard := func(c *dbv1.DatabaseCluster) { c.Spec.Storage.StorageClassName = ptr.To("standard") }
	for _, c := range []struct {
		name     string
		old, new func(*dbv1.DatabaseCluster)
		want     string
	}{
		{name: "size", new: func(c *dbv1.DatabaseCluster) { c.Spec.Storage.Size = resource.MustParse("2Gi") },
			want: `spec.storage.size: Invalid value: "2Gi": ` + immutable + "keep the size the cluster was created with"},
		{name: "class changed", old: standard, new: func(c *dbv1.DatabaseCluster) { c.Spec.Storage.StorageClassName = ptr.To("fast") },
			want: `spec.storage.storageClassName: Invalid value: "fast": ` + immutable + "keep storageClassName standard"},
		{name: "class removed", old: standard,
			want: "spec.storage.storageClassName: Forbidden: " + immutable + "storageClassName cannot be removed; keep standard"},
		{name: "class added", new: standard,
			want: "spec.storage.storageClassName: Forbidden: " + immutable + "storageClassName cannot be added; remove it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := s.Validate(t.Context(), cluster(c.new), cluster(c.old))
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			g.Expect(errs[0].Error()).To(Equal(c.want))
		})
	}
}

// TestClusterSchemaSizeIsAQuantity: a size that is not a quantity is refused
// by the schema's pattern, not by a CEL conversion error.
func TestClusterSchemaSizeIsAQuantity(t *testing.T) {
	g := NewWithT(t)
	s, err := ClusterSchema("v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	u := unstructuredCluster(t, nil)
	g.Expect(unstructured.SetNestedField(u.Object, "ten gigs", "spec", "storage", "size")).To(Succeed())
	errs := s.Validate(t.Context(), u, nil)
	g.Expect(errs).To(HaveLen(1), "%v", errs)
	g.Expect(errs[0].Error()).To(HavePrefix(`spec.storage.size: Invalid value: "ten gigs": spec.storage.size in body should match`))
}
