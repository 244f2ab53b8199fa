// Package bucket keeps backups in an S3-compatible bucket (a backup.Store),
// for the backup Job. It is apart from package backup so that the manager,
// which reads backup reports, does not link an S3 client.
package bucket

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Bucket keeps backups as objects under a prefix in an S3-compatible bucket.
type Bucket struct {
	client *minio.Client
	bucket string
	prefix string
}

// Options locate a bucket and say how to reach it.
type Options struct {
	// Endpoint is the server's URL, http:// or https://.
	Endpoint string
	Bucket   string
	// Prefix is prepended to every backup's name to make its key.
	Prefix string
	Region string
	// AccessKeyID and SecretAccessKey are the credentials.
	AccessKeyID, SecretAccessKey string
	// InsecureSkipTLSVerify turns off verification of an https endpoint's
	// certificate.
	InsecureSkipTLSVerify bool
}

// New returns a Store over the bucket; it makes no request.
func New(o Options) (*Bucket, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the S3 endpoint %q is not an http:// or https:// URL with a host", o.Endpoint)
	}
	if o.AccessKeyID == "" || o.SecretAccessKey == "" {
		return nil, fmt.Errorf("the S3 credentials are empty: the Secret needs accessKeyID and secretAccessKey")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if o.InsecureSkipTLSVerify {
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user opted out of verification (insecureSkipTLSVerify)
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, ""),
		Secure:       u.Scheme == "https",
		Region:       o.Region,
		Transport:    transport,
		BucketLookup: minio.BucketLookupPath, // works with every S3-compatible server
	})
	if err != nil {
		return nil, err
	}
	return &Bucket{client: c, bucket: o.Bucket, prefix: o.Prefix}, nil
}

// List returns the names (keys without the prefix) directly under the prefix.
func (b *Bucket) List(ctx context.Context) ([]string, error) {
	var names []string
	for obj := range b.client.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("listing s3://%s/%s: %w", b.bucket, b.prefix, obj.Err)
		}
		name := strings.TrimPrefix(obj.Key, b.prefix)
		if name != "" && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	return names, nil
}

// Put uploads the file; an S3 object appears whole or not at all.
func (b *Bucket) Put(ctx context.Context, name, path string) error {
	_, err := b.client.FPutObject(ctx, b.bucket, b.prefix+name, path, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("uploading to %s: %w", b.Location(name), err)
	}
	return nil
}

// Delete removes the object.
func (b *Bucket) Delete(ctx context.Context, name string) error {
	return b.client.RemoveObject(ctx, b.bucket, b.prefix+name, minio.RemoveObjectOptions{})
}

// Fetch downloads the object at key (prefix included) to path.
func (b *Bucket) Fetch(ctx context.Context, key, path string) error {
	if err := b.client.FGetObject(ctx, b.bucket, key, path, minio.GetObjectOptions{}); err != nil {
		return fmt.Errorf("downloading s3://%s/%s: %w", b.bucket, key, err)
	}
	return nil
}

// Location is s3://<bucket>/<prefix><name>.
func (b *Bucket) Location(name string) string { return "s3://" + b.bucket + "/" + b.prefix + name }
