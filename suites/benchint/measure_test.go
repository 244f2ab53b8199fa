//go:build bench

package benchint

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// Processes whose CPU time the benchmark reports.
const (
	cpuManager   = "manager"
	cpuAPIServer = "kube-apiserver"
	cpuEtcd      = "etcd"
	cpuHarness   = "harness (this test)"
)

// cpuSeconds is user+system CPU time per process.
type cpuSeconds map[string]float64

func (c cpuSeconds) minus(before cpuSeconds) cpuSeconds {
	out := cpuSeconds{}
	for k, v := range c {
		out[k] = v - before[k]
	}
	return out
}

func (c cpuSeconds) names() []string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return c[names[i]] > c[names[j]] })
	return names
}

// clockTicks is the kernel's USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// processCPU reads the CPU time of the manager, of this test process (the
// simulated StatefulSet controller and the polling client) and of the
// envtest API server and etcd, which are this process's children.
func processCPU(self, manager int) cpuSeconds {
	out := cpuSeconds{}
	if _, v, ok := procStat(self); ok {
		out[cpuHarness] = v
	}
	if _, v, ok := procStat(manager); ok {
		out[cpuManager] = v
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == manager {
			continue
		}
		ppid, v, ok := procStat(pid)
		if !ok || ppid != self {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		switch name := strings.TrimSpace(string(comm)); name {
		case cpuAPIServer, cpuEtcd:
			out[name] += v
		}
	}
	return out
}

// procStat reads a process's parent and its user+system CPU seconds from
// /proc/<pid>/stat.
func procStat(pid int) (ppid int, cpu float64, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	// After the name: state(3) ppid(4) ... utime(14) stime(15).
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return ppid, (utime + stime) / clockTicks, true
}

// profileChunk is how long each CPU profile runs; the chunks together cover
// the run, and pprof merges them.
const profileChunk = 10 * time.Second

// captureCPUProfiles fetches consecutive CPU profiles of the manager until
// ctx ends, and sends the files it wrote when it is done. The chunk that is
// running when ctx ends is finished, not cut.
func captureCPUProfiles(ctx context.Context, t *testing.T, base, dir string) <-chan []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan []string, 1)
	go func() {
		var files []string
		for i := 1; ctx.Err() == nil; i++ {
			path := filepath.Join(dir, fmt.Sprintf("cpu-%03d.pprof", i))
			url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(profileChunk.Seconds()))
			if err := download(context.WithoutCancel(ctx), url, path); err != nil {
				t.Logf("CPU profile %d: %v", i, err)
				break
			}
			files = append(files, path)
		}
		done <- files
	}()
	return done
}

func download(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// summarizeProfiles takes a heap profile, then writes `go tool pprof -top`
// of the merged CPU profiles (flat and cumulative) and of the heap's
// allocations next to them, and prints the head of the CPU summary.
func summarizeProfiles(t *testing.T, bin, pprofBase, dir string, cpuFiles []string) {
	t.Helper()
	heap := filepath.Join(dir, "heap.pprof")
	if err := download(t.Context(), pprofBase+"/debug/pprof/heap", heap); err != nil {
		t.Logf("heap profile: %v", err)
		heap = ""
	}
	if len(cpuFiles) == 0 {
		t.Log("no CPU profile was captured")
		return
	}
	summaries := []struct {
		file string
		args []string
	}{
		{"cpu-top.txt", append([]string{"-top", "-nodecount=40", bin}, cpuFiles...)},
		{"cpu-top-cum.txt", append([]string{"-top", "-cum", "-nodecount=60", bin}, cpuFiles...)},
	}
	if heap != "" {
		summaries = append(summaries, struct {
			file string
			args []string
		}{"heap-alloc-top.txt", []string{"-top", "-sample_index=alloc_space", "-nodecount=30", bin, heap}})
	}
	for _, s := range summaries {
		out, err := exec.CommandContext(t.Context(), "go", append([]string{"tool", "pprof"}, s.args...)...).CombinedOutput()
		if err != nil {
			t.Logf("go tool pprof %s: %v\n%s", strings.Join(s.args, " "), err, out)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, s.file), out, 0o644); err != nil {
			t.Fatal(err)
		}
		if s.file == "cpu-top.txt" {
			lines := strings.Split(string(out), "\n")
			fmt.Printf("\nmanager CPU profile (%d × %s, merged; full summaries in %s):\n%s\n",
				len(cpuFiles), profileChunk, dir, strings.Join(lines[:min(len(lines), 30)], "\n"))
		}
	}
}

// startSimulator runs the simulated StatefulSet controller and kubelets
// until ctx ends, and returns the client the convergence poll reads
// through.
func startSimulator(ctx context.Context, t *testing.T, env *framework.Envtest, scheme *runtime.Scheme) client.Client {
	// Like the real ones, they read through informers: listing each
	// StatefulSet's pods from the API server on every step costs the API
	// server more than the operator does at N=1000 (a step is N pod LISTs)
	// and makes the harness, not the operator, set the pace. The
	// convergence poll reads the same cache.
	harness := env.Client
	if *cachedHarness {
		harness = cachedClient(ctx, t, env.Config, scheme)
	}
	sim := &framework.StatefulSetSimulator{Client: harness, CachedReads: *cachedHarness}
	go framework.RunEvery(ctx, 200*time.Millisecond, sim.Step, func(err error) {
		// A cached read can be a step behind: the write conflicts and the
		// next step, with a fresher cache, does it.
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			t.Logf("simulator: %v", err)
		}
	})
	return harness
}

// cachedClient reads through informers started on first use and writes to
// the API server directly.
func cachedClient(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme) client.Client {
	t.Helper()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ix := framework.PodControllerIndex
	if err := c.IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
		t.Fatalf("indexing the harness cache by %s: %v", ix.Field, err)
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			t.Logf("harness cache: %v", err)
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the harness cache did not sync")
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// apiServerRequests reads the API server's own request-duration histogram:
// every client's requests, the manager's and the harness's.
func apiServerRequests(ctx context.Context, cfg *rest.Config) (*dto.MetricFamily, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	mf := families["apiserver_request_duration_seconds"]
	if mf == nil {
		return nil, fmt.Errorf("the API server reports no apiserver_request_duration_seconds")
	}
	return mf, nil
}

// writesOf keeps the series of writes: create, apply, patch and update.
func writesOf(mf *dto.MetricFamily) *dto.MetricFamily {
	writes := &dto.MetricFamily{Name: mf.Name, Type: mf.Type}
	for _, m := range mf.GetMetric() {
		if slices.Contains([]string{"APPLY", "PATCH", "POST", "PUT"}, label(m, "verb")) {
			writes.Metric = append(writes.Metric, m)
		}
	}
	return writes
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// requestTime is the API server's time on one kind of request.
type requestTime struct {
	request string
	count   float64
	seconds float64
}

// busiestRequests sums the API server's time by verb and resource, most
// first, leaving out watches.
func busiestRequests(mf *dto.MetricFamily, top int) []requestTime {
	byKey := map[string]*requestTime{}
	for _, m := range mf.GetMetric() {
		if v := label(m, "verb"); v == "WATCH" || v == "CONNECT" {
			continue // long-running: their time is their lifetime
		}
		key := label(m, "verb") + " " + label(m, "resource")
		if sub := label(m, "subresource"); sub != "" {
			key += "/" + sub
		}
		rt := byKey[key]
		if rt == nil {
			rt = &requestTime{request: key}
			byKey[key] = rt
		}
		rt.count += float64(m.GetHistogram().GetSampleCount())
		rt.seconds += m.GetHistogram().GetSampleSum()
	}
	out := make([]requestTime, 0, len(byKey))
	for _, rt := range byKey {
		out = append(out, *rt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seconds > out[j].seconds })
	return out[:min(top, len(out))]
}

// histogramMean is a histogram's sum over its count, across its series.
func histogramMean(mf *dto.MetricFamily) float64 {
	var sum, count float64
	for _, m := range mf.GetMetric() {
		sum += m.GetHistogram().GetSampleSum()
		count += float64(m.GetHistogram().GetSampleCount())
	}
	return sum / count
}
