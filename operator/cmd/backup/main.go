// Command backup takes one scheduled backup of a DatabaseCluster: the
// operator's backup CronJob runs it in the operator's image. It saves a
// snapshot from the cluster's client Service, verifies it as etcdutl does,
// stores it in the destination, applies the retention policy, and writes a
// JSON report to the termination message, where the operator reads it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/gauntlet-dev/gauntlet/operator/internal/backup"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup/bucket"
	"github.com/gauntlet-dev/gauntlet/operator/internal/backup/etcdsnapshot"
)

type options struct {
	cluster, endpoints, dir, claim, workDir, terminationLog string
	bucket                                                  bucket.Options
	policy                                                  backup.Policy
	dialTimeout, timeout                                    time.Duration
}

// Environment variables the S3 credentials are read from (the CronJob sets
// them from the credentials Secret).
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
)

// bindBucketFlags binds the --s3-* flags that locate a bucket (the
// credentials come from the environment); endpoint says what the endpoint is for.
func bindBucketFlags(fs *flag.FlagSet, o *bucket.Options, endpoint string) {
	fs.StringVar(&o.Endpoint, "s3-endpoint", "", endpoint+"; credentials from $"+EnvAccessKeyID+" and $"+EnvSecretAccessKey+".")
	fs.StringVar(&o.Bucket, "s3-bucket", "", "The bucket.")
	fs.StringVar(&o.Prefix, "s3-prefix", "", "Prefix of every backup's key.")
	fs.StringVar(&o.Region, "s3-region", "us-east-1", "The bucket's region.")
	fs.BoolVar(&o.InsecureSkipTLSVerify, "s3-insecure-skip-tls-verify", false, "Do not verify the https endpoint's certificate.")
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.StringVar(&o.cluster, "cluster", "", "Name of the DatabaseCluster; backups are named <cluster>-backup-<time>.db.")
	fs.StringVar(&o.endpoints, "endpoints", "", "Comma-separated etcd client URLs to take the snapshot from, tried in turn.")
	fs.StringVar(&o.dir, "dir", "", "Directory the backups are kept in (the cluster's snapshot claim, mounted); or use --s3-*.")
	fs.StringVar(&o.claim, "claim", "", "Name of the claim mounted at --dir, for the backup's location.")
	bindBucketFlags(fs, &o.bucket, "URL of an S3-compatible server to keep the backups in, instead of --dir")
	fs.StringVar(&o.workDir, "work-dir", os.TempDir(), "Writable directory where the snapshot is saved and verified before it is stored.")
	fs.StringVar(&o.terminationLog, "termination-log", "/dev/termination-log", "Where the JSON report is written for the operator; empty writes it to stdout only.")
	fs.IntVar(&o.policy.Count, "retain-count", 0, "Keep the newest N backups (0: no limit by count).")
	fs.DurationVar(&o.policy.MaxAge, "retain-max-age", 0, "Delete backups older than this (0: no limit by age).")
	fs.DurationVar(&o.dialTimeout, "dial-timeout", 10*time.Second, "How long to wait for a member to answer.")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "How long the whole backup may take.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.cluster == "":
		return o, fmt.Errorf("--cluster is required")
	case o.endpoints == "":
		return o, fmt.Errorf("--endpoints is required")
	case o.bucket.Endpoint == "" && (o.dir == "" || o.claim == ""):
		return o, fmt.Errorf("a destination is required: --dir and --claim, or --s3-endpoint and --s3-bucket")
	case o.bucket.Endpoint != "" && (o.dir != "" || o.bucket.Bucket == ""):
		return o, fmt.Errorf("--s3-endpoint needs --s3-bucket, and not --dir")
	case o.policy.Count < 0 || o.policy.MaxAge < 0:
		return o, fmt.Errorf("--retain-count and --retain-max-age must not be negative")
	case o.policy.Count == 0 && o.policy.MaxAge == 0:
		return o, fmt.Errorf("a retention is required: --retain-count, --retain-max-age or both")
	}
	return o, nil
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// run takes one backup and returns the exit code: 0 when a verified backup
// was stored, 1 when not, 2 for bad flags. With "fetch" first, it downloads
// one backup for a restore instead.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "fetch" {
		return fetch(ctx, args[1:], stderr)
	}
	o, err := parseFlags(args)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, o.timeout)
	defer cancelTimeout()
	lg := zap.NewNop()
	var store backup.Store = backup.Dir{Path: o.dir, Claim: o.claim}
	if o.bucket.Endpoint != "" {
		o.bucket.AccessKeyID, o.bucket.SecretAccessKey = os.Getenv(EnvAccessKeyID), os.Getenv(EnvSecretAccessKey)
		b, err := bucket.New(o.bucket)
		if err != nil {
			_, _ = fmt.Fprintln(stderr, err)
			return 2
		}
		store = b
	}
	r := backup.Run(ctx, backup.Options{
		Cluster: o.cluster,
		Store:   store,
		Policy:  o.policy,
		WorkDir: o.workDir,
		Save:    etcdsnapshot.Saver(strings.Split(o.endpoints, ","), o.dialTimeout, lg),
		Verify:  etcdsnapshot.Verify(lg),
	})
	out := encodeReport(r)
	_, _ = fmt.Fprintln(stdout, string(out))
	if o.terminationLog != "" {
		if err := os.WriteFile(o.terminationLog, out, 0o600); err != nil {
			_, _ = fmt.Fprintf(stderr, "writing the report to %s: %v\n", o.terminationLog, err)
		}
	}
	if !r.Succeeded {
		_, _ = fmt.Fprintln(stderr, "backup failed:", r.Message)
		return 1
	}
	return 0
}

// maxReport is what fits in a termination message (4096 bytes), with room.
const maxReport = 4000

// encodeReport returns the report as JSON short enough for a termination
// message: a long list of deleted backups is cut to its last names.
func encodeReport(r backup.Report) []byte {
	for {
		out, _ := json.Marshal(r) // a Report always encodes
		if len(out) <= maxReport || len(r.Deleted) == 0 {
			return out
		}
		r.Deleted = r.Deleted[len(r.Deleted)/2:]
		if r.Message == "" {
			r.Message = "retention deleted more backups than the report lists"
		}
	}
}

// fetch downloads s3://<bucket>/<prefix><key> to --to, for a restore Job's
// next container. A failure is written to the termination message, where
// the operator reads why the restore failed.
func fetch(ctx context.Context, args []string, stderr io.Writer) int {
	var o bucket.Options
	var key, to, terminationLog string
	fs := flag.NewFlagSet("backup fetch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bindBucketFlags(fs, &o, "URL of the S3-compatible server")
	fs.StringVar(&key, "key", "", "Key of the backup under the prefix.")
	fs.StringVar(&to, "to", "", "File to write.")
	fs.StringVar(&terminationLog, "termination-log", "/dev/termination-log", "Where a failure is written for the operator.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Endpoint == "" || o.Bucket == "" || key == "" || to == "" {
		_, _ = fmt.Fprintln(stderr, "backup fetch needs --s3-endpoint, --s3-bucket, --key and --to")
		return 2
	}
	o.AccessKeyID, o.SecretAccessKey = os.Getenv(EnvAccessKeyID), os.Getenv(EnvSecretAccessKey)
	fail := func(err error) int {
		_, _ = fmt.Fprintln(stderr, err)
		if terminationLog != "" {
			_ = os.WriteFile(terminationLog, []byte(err.Error()), 0o600)
		}
		return 1
	}
	b, err := bucket.New(o)
	if err != nil {
		return fail(err)
	}
	if err := b.Fetch(ctx, o.Prefix+key, to); err != nil {
		return fail(err)
	}
	return 0
}
