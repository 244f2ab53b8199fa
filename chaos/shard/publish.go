package shard

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxResults keeps a ConfigMap under the API server's 1 MiB bound with
// room for its metadata.
const maxResults = 900 << 10

// logTail is how much of a failed run's operator log a shard publishes.
const logTail = 32 << 10

// results says whether a file of a shard's folder is published, and how
// much of its end (0: all of it): what the merged report is made of (an
// explore campaign's explore.json and report.json, a benchmark's bugs.json
// and its campaigns' and replays' reports), the findings' scenario files,
// and of what failed its errors, the end of the operator's log and of
// each campaign's and replay's own log. Object dumps stay in the pod.
func results(rel string) (keep bool, tail int64) {
	switch path.Base(rel) {
	case "explore.json", "report.json", "explore.md", "bugs.json", "bugs.md", "errors.txt":
		return true, 0
	case "operator-process.log":
		return true, logTail
	}
	dir := path.Dir(rel)
	switch {
	case dir == "findings" || strings.HasSuffix(dir, "/findings"):
		return true, 0
	case strings.HasSuffix(rel, ".log") && (dir == "campaigns" || dir == "replays"):
		return true, logTail
	}
	return false, 0
}

// readTail reads a file, or its last tail bytes.
func readTail(path string, tail int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if tail > 0 {
		if fi, err := f.Stat(); err == nil && fi.Size() > tail {
			if _, err := f.Seek(-tail, io.SeekEnd); err != nil {
				return nil, err
			}
		}
	}
	return io.ReadAll(f)
}

// Pack is the gzipped tar of a campaign folder's results.
func Pack(dir string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := eachFile(dir, func(rel, path string) error {
		keep, tail := results(rel)
		if !keep {
			return nil
		}
		b, err := readTail(path, tail)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	if buf.Len() > maxResults {
		return nil, fmt.Errorf("the results of %s are %d KiB gzipped, more than a ConfigMap holds (%d KiB): run fewer sequences per shard (--sequences) or more shards", dir, buf.Len()>>10, maxResults>>10)
	}
	return buf.Bytes(), nil
}

// Unpack writes a Pack into dir, refusing names that leave it.
func Unpack(b []byte, dir string) error {
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) || h.Typeflag != tar.TypeReg {
			return fmt.Errorf("results: %q is not a file inside the campaign's folder", h.Name)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(tr, maxResults*8))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// Identity is a shard's place, from its pod's environment.
type Identity struct {
	Namespace, Job string
	JobUID         types.UID
	Index          int
}

// FromEnv reads a shard's identity from the variables its Job sets.
func FromEnv() (Identity, error) {
	id := Identity{Namespace: os.Getenv(EnvNamespace), Job: os.Getenv(EnvJobName), JobUID: types.UID(os.Getenv(EnvJobUID))}
	k, err := strconv.Atoi(os.Getenv(EnvIndex))
	if err != nil || id.Namespace == "" || id.Job == "" || id.JobUID == "" {
		return id, fmt.Errorf("--publish runs in a shard's pod, whose Job sets %s, %s, %s and %s: this process has %q, %q, %q and %q",
			EnvNamespace, EnvJobName, EnvJobUID, EnvIndex, id.Namespace, id.Job, id.JobUID, os.Getenv(EnvIndex))
	}
	id.Index = k
	return id, nil
}

// Publish stores a shard's results as its ConfigMap, owned by its Job (so
// it goes with the Job), replacing one a rerun of the shard left.
func Publish(ctx context.Context, c client.Client, id Identity, dir string) error {
	b, err := Pack(dir)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ConfigMapName(id.Job, id.Index), Namespace: id.Namespace,
			Labels:          map[string]string{LabelJob: id.Job, LabelShard: strconv.Itoa(id.Index)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: id.Job, UID: id.JobUID}},
		},
		BinaryData: map[string][]byte{ResultsKey: b},
	}
	err = c.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		old := &corev1.ConfigMap{}
		if err = c.Get(ctx, client.ObjectKeyFromObject(cm), old); err == nil {
			cm.ResourceVersion = old.ResourceVersion
			err = c.Update(ctx, cm)
		}
	}
	if err != nil {
		return fmt.Errorf("publishing shard %d's results as ConfigMap %s/%s: %w", id.Index, id.Namespace, cm.Name, err)
	}
	return nil
}
