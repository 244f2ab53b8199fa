package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/chaos/htmlreport"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// Options are a sharded campaign on a cluster.
type Options struct {
	Config *rest.Config
	// Job is the campaign's Job; its Namespace is made when missing and,
	// if made here, deleted afterwards unless Keep.
	Job  JobOptions
	Keep bool
	// Out is the merged report's folder; each shard's results are
	// unpacked under Out/shard-<k>.
	Out string
	// OperatorFile is named in the replay commands of the summary.
	OperatorFile string
	// Poll is how often the Job is looked at (default 5s).
	Poll time.Duration
	Logf func(format string, args ...any)
}

// Run runs the campaign's Job, waits for every shard, gathers their
// results and merges them into one report under o.Out. A shard that
// failed is named with the end of its log; the others still merge.
func Run(ctx context.Context, o Options) (*report.Report, error) {
	dirs, gerr := RunJob(ctx, o)
	var parts []*report.Report
	for _, k := range slices.Sorted(maps.Keys(dirs)) {
		rep, err := report.ReadReport(dirs[k])
		if err != nil {
			gerr = errors.Join(gerr, fmt.Errorf("shard %d's report: %w", k, err))
			continue
		}
		parts = append(parts, o.adopt(rep, k))
	}
	if len(parts) == 0 {
		return nil, errors.Join(gerr, fmt.Errorf("no shard published results"))
	}
	merged, err := report.MergeCampaigns(parts)
	if err != nil {
		return nil, errors.Join(gerr, err)
	}
	return merged, errors.Join(gerr, o.write(merged))
}

// RunJob runs an Indexed Job of shards on the cluster (its namespace,
// RBAC and Job made here and removed afterwards), waits for it to end and
// unpacks each shard's published results under o.Out/shard-<k>: the
// folders, by index. A shard that published none is an error naming the
// end of its pod's log; the others' folders are still returned.
func RunJob(ctx context.Context, o Options) (map[int]string, error) {
	if o.Poll == 0 {
		o.Poll = 5 * time.Second
	}
	c, err := client.New(o.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	created, err := ensureNamespace(ctx, c, o.Job.Namespace)
	if err != nil {
		return nil, err
	}
	defer o.cleanup(c, created)
	sa, role, binding := RBAC(o.Job.Name, o.Job.Namespace)
	for _, obj := range []client.Object{sa, role, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	job := Job(o.Job)
	if err := c.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("Job %s/%s exists already: a campaign of this seed runs there, or one was left; delete it (kubectl delete job -n %s %s) or give another --seed",
				job.Namespace, job.Name, job.Namespace, job.Name)
		}
		return nil, fmt.Errorf("creating Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	o.Logf("Job %s/%s: %d shards of image %s, %d at a time", job.Namespace, job.Name, o.Job.Shards, o.Job.Image, *job.Spec.Parallelism)
	done, err := o.wait(ctx, c, job)
	if err != nil {
		return nil, err
	}
	return o.gather(ctx, c, done)
}

func ensureNamespace(ctx context.Context, c client.Client, name string) (bool, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := c.Create(ctx, ns)
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return true, nil
}

// cleanupWithin bounds the deletion of what a sharded campaign made:
// one request, answered within seconds by a reachable API server.
const cleanupWithin = 30 * time.Second

// pastDeadline is how long the wait for the Job outlasts its deadline:
// the Job controller fails a Job past its deadline within seconds, and
// the shards that ended just before it still publish their results.
const pastDeadline = 2 * time.Minute

// cleanup deletes the namespace made here, or else the Job (its
// ConfigMaps go with it), unless the user keeps them.
func (o Options) cleanup(c client.Client, createdNamespace bool) {
	if o.Keep {
		o.Logf("keeping namespace %s and Job %s (--keep-cluster)", o.Job.Namespace, o.Job.Name)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupWithin)
	defer cancel()
	var obj client.Object = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: o.Job.Name, Namespace: o.Job.Namespace}}
	if createdNamespace {
		obj = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Job.Namespace}}
	}
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		o.Logf("deleting %s: %v", obj.GetName(), err)
	}
}

// wait polls the Job until it ends (every index done or failed, or its
// deadline passed), printing its shards' counts when they change; on
// timeout it says what it last saw.
func (o Options) wait(ctx context.Context, c client.Client, job *batchv1.Job) (*batchv1.Job, error) {
	start := time.Now()
	last, seen := "", &batchv1.Job{}
	timeout := time.Duration(o.Job.DeadlineSeconds)*time.Second + pastDeadline
	err := wait.PollUntilContextTimeout(ctx, o.Poll, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), seen); err != nil {
			o.Logf("reading Job %s: %v (retrying)", job.Name, err)
			return false, nil
		}
		s := seen.Status
		now := fmt.Sprintf("%d running (%d ready), %d done, %d failed", s.Active, ptr.Deref(s.Ready, 0), s.Succeeded, s.Failed)
		if now != last {
			o.Logf("shards: %s (%s)", now, time.Since(start).Round(time.Second))
			last = now
		}
		return ended(seen) != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("Job %s/%s did not end within %s (its deadline and 2 minutes): last seen %s, conditions %s",
			job.Namespace, job.Name, timeout, last, conditions(seen))
	}
	o.Logf("Job %s ended: %s, after %s", job.Name, ended(seen), time.Since(start).Round(time.Second))
	return seen, nil
}

// ended is the Job's Complete or Failed condition, with its reason ("" while it runs).
func ended(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return strings.TrimSpace(string(c.Type) + " " + c.Reason)
		}
	}
	return ""
}

func conditions(j *batchv1.Job) string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// gather unpacks every shard's ConfigMap into Out/shard-<k>; a shard
// with none is named with the end of its pod's log.
func (o Options) gather(ctx context.Context, c client.Client, job *batchv1.Job) (map[int]string, error) {
	cms := &corev1.ConfigMapList{}
	if err := c.List(ctx, cms, client.InNamespace(job.Namespace), client.MatchingLabels{LabelJob: job.Name}); err != nil {
		return nil, fmt.Errorf("listing the shards' ConfigMaps: %w", err)
	}
	dirs := map[int]string{}
	var errs []error
	for _, cm := range cms.Items {
		k, err := strconv.Atoi(cm.Labels[LabelShard])
		if err != nil {
			errs = append(errs, fmt.Errorf("ConfigMap %s: shard label %q", cm.Name, cm.Labels[LabelShard]))
			continue
		}
		dir := filepath.Join(o.Out, "shard-"+strconv.Itoa(k))
		if err := Unpack(cm.BinaryData[ResultsKey], dir); err != nil {
			errs = append(errs, fmt.Errorf("shard %d's results: %w", k, err))
			continue
		}
		dirs[k] = dir
	}
	for k := range o.Job.Shards {
		if _, ok := dirs[k]; !ok {
			errs = append(errs, fmt.Errorf("shard %d published no results: %s", k, o.podLog(ctx, job, k)))
		}
	}
	return dirs, errors.Join(errs...)
}

// adopt points a shard's findings at their files in the merged folder,
// where it copies them.
func (o Options) adopt(rep *report.Report, k int) *report.Report {
	dir := filepath.Join(o.Out, "shard-"+strconv.Itoa(k))
	for i, f := range rep.Campaign.Findings {
		name := filepath.Base(f.File)
		src := filepath.Join(dir, "findings")
		for _, file := range []string{name, strings.TrimSuffix(name, ".yaml") + "-resource.yaml"} {
			if b, err := os.ReadFile(filepath.Join(src, file)); err == nil {
				_ = os.MkdirAll(filepath.Join(o.Out, "findings"), 0o755)
				_ = os.WriteFile(filepath.Join(o.Out, "findings", file), b, 0o644)
			}
		}
		rep.Campaign.Findings[i].File = filepath.Join(o.Out, "findings", name)
	}
	return rep
}

// podLog is the end of shard k's pod's log, or why there is none.
func (o Options) podLog(ctx context.Context, job *batchv1.Job, k int) string {
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return err.Error()
	}
	pods, err := cs.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("batch.kubernetes.io/job-name=%s,batch.kubernetes.io/job-completion-index=%d", job.Name, k)})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("no pod of index %d to read (%v)", k, err)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	p := pods.Items[0]
	b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To(int64(15))}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("pod %s is %s; its log: %v", p.Name, p.Status.Phase, err)
	}
	return fmt.Sprintf("pod %s is %s; the end of its log:\n%s", p.Name, p.Status.Phase, strings.TrimSpace(string(b)))
}

// write puts the merged report in Out: report.json and its HTML page,
// explore.json and explore.md.
func (o Options) write(rep *report.Report) error {
	if err := rep.Write(o.Out); err != nil {
		return err
	}
	_, err := htmlreport.Write(rep, o.Out)
	return errors.Join(err, rep.Campaign.Save(o.Out),
		os.WriteFile(filepath.Join(o.Out, "explore.md"), []byte(rep.Campaign.Summary(o.OperatorFile, true)), 0o644))
}
