package parallel

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// fakeRuns plays scenario runs: each records how many ran at once, and a
// shared job's first attempt waits until the pool is full, so that the
// jobs truly overlap.
type fakeRuns struct {
	jobs    []Job
	workers int
	// fails are the jobs whose attempts beside others fail.
	fails map[string]bool
	// failAlone are the jobs whose attempts alone fail too.
	failAlone map[string]bool
	// skips are the jobs that are skipped.
	skips map[string]bool

	mu      sync.Mutex
	full    *sync.Cond
	active  int
	started int
	most    int
	// activeAt is, by job and attempt, how many ran at once as it began.
	order     []string
	alonePeer map[string]int
}

func (f *fakeRuns) run(ctx context.Context, i int, alone bool) *report.Result {
	name := f.jobs[i].Name
	f.mu.Lock()
	f.active++
	f.started++
	f.most = max(f.most, f.active)
	f.order = append(f.order, name)
	shared := f.jobs[i].Alone == "" && !alone
	if !shared {
		f.alonePeer[name] = max(f.alonePeer[name], f.active-1)
	}
	f.full.Broadcast()
	for shared && f.active < f.workers && f.started < f.sharedCount() && ctx.Err() == nil {
		f.full.Wait()
	}
	f.active--
	f.mu.Unlock()
	res := &report.Result{Run: &report.Run{Scenario: name}}
	if f.skips[name] {
		res.Skipped = "the node kernel lacks netem"
	}
	if (f.fails[name] && !alone) || f.failAlone[name] {
		res.Violations = []string{name + " failed"}
	}
	return res
}

func (f *fakeRuns) sharedCount() int {
	n := 0
	for _, j := range f.jobs {
		if j.Alone == "" {
			n++
		}
	}
	return n
}

func newFake(jobs []Job, workers int) *fakeRuns {
	f := &fakeRuns{jobs: jobs, workers: workers, fails: map[string]bool{}, failAlone: map[string]bool{}, skips: map[string]bool{}, alonePeer: map[string]int{}}
	f.full = sync.NewCond(&f.mu)
	return f
}

var jobs = []Job{
	{Name: "pod-kill"},
	{Name: "operator-kill", Alone: "it acts on role operator, the operator's pods"},
	{Name: "partition"},
	{Name: "delay"},
	{Name: "node-loss", Alone: "its fault stops a node, with every pod on it"},
	{Name: "loss"},
}

func runFake(t *testing.T, f *fakeRuns) ([]*report.Result, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var done []string
	res := Run(ctx, f.jobs, Options{Workers: f.workers, Run: f.run, Done: func(i int, _ *report.Result) { done = append(done, f.jobs[i].Name) }})
	NewWithT(t).Expect(ctx.Err()).NotTo(HaveOccurred(), "the run ended by its deadline; started: %v", f.order)
	return res, done
}

func TestSharedJobsRunSideBySideAndTheOthersAlone(t *testing.T) {
	g := NewWithT(t)
	f := newFake(jobs, 3)
	res, done := runFake(t, f)
	g.Expect(f.most).To(Equal(3), "three shared jobs at once")
	g.Expect(f.alonePeer).To(Equal(map[string]int{"operator-kill": 0, "node-loss": 0}), "nothing beside a job that runs alone")
	g.Expect(f.order[4:]).To(Equal([]string{"operator-kill", "node-loss"}), "the shared jobs first, then the others in the files' order")
	g.Expect(done).To(ConsistOf("pod-kill", "operator-kill", "partition", "delay", "node-loss", "loss"))
	for i, r := range res {
		g.Expect(r.Scenario).To(Equal(jobs[i].Name), "results in the jobs' order")
		g.Expect(r.Verdict()).To(Equal(report.Passed))
		g.Expect(r.Sharing).NotTo(BeNil())
		g.Expect(r.Sharing.Alone).To(Equal(jobs[i].Alone))
	}
	g.Expect(res[1].Sharing.Beside).To(BeEmpty())
	g.Expect(res[0].Sharing.Beside).To(ContainElements("partition", "delay"))
}

func TestAJobThatFailsBesideOthersRunsAgainAlone(t *testing.T) {
	g := NewWithT(t)
	f := newFake(jobs, 3)
	f.fails["partition"] = true
	f.failAlone["loss"] = true
	res, _ := runFake(t, f)
	g.Expect(f.order[len(f.order)-2:]).To(Equal([]string{"partition", "loss"}), "the second attempts come last")
	g.Expect(f.alonePeer).To(HaveKeyWithValue("partition", 0))

	p := res[2]
	g.Expect(p.Verdict()).To(Equal(report.Passed), "the verdict is the attempt made alone")
	g.Expect(p.Sharing.Alone).To(Equal("it failed beside others"))
	g.Expect(p.Sharing.FirstAttempt).To(Equal([]string{"partition failed"}))
	g.Expect(p.Sharing.Beside).NotTo(BeEmpty())

	l := res[5]
	g.Expect(l.Verdict()).To(Equal(report.Failed), "a failure alone stands")
	g.Expect(l.Sharing.FirstAttempt).To(Equal([]string{"loss failed"}))
}

func TestOneWorkerIsASerialRun(t *testing.T) {
	g := NewWithT(t)
	f := newFake(jobs, 1)
	f.fails["delay"] = true
	res, done := runFake(t, f)
	g.Expect(f.most).To(Equal(1))
	g.Expect(f.order).To(Equal([]string{"pod-kill", "operator-kill", "partition", "delay", "node-loss", "loss"}), "the files' order, nothing run twice")
	g.Expect(done).To(Equal(f.order))
	g.Expect(res[3].Verdict()).To(Equal(report.Failed))
	for _, r := range res {
		g.Expect(r.Sharing).To(BeNil(), "a serial run shares nothing")
	}
}

func TestAFailureBesideNothingIsNotRunAgain(t *testing.T) {
	g := NewWithT(t)
	f := newFake([]Job{{Name: "only"}, {Name: "op", Alone: "it acts on role operator, the operator's pods"}}, 3)
	f.fails["only"] = true
	res, _ := runFake(t, f)
	g.Expect(f.order).To(Equal([]string{"only", "op"}))
	g.Expect(res[0].Verdict()).To(Equal(report.Failed))
	g.Expect(res[0].Sharing.FirstAttempt).To(BeEmpty())
}

func TestASkippedJobRanBesideNothing(t *testing.T) {
	g := NewWithT(t)
	f := newFake([]Job{{Name: "a"}, {Name: "netem"}, {Name: "b"}}, 3)
	f.skips["netem"] = true
	res, _ := runFake(t, f)
	g.Expect(f.most).To(Equal(3))
	g.Expect(res[1].Verdict()).To(Equal(report.Skipped))
	g.Expect(res[0].Sharing.Beside).To(Equal([]string{"b"}), "a scenario skipped before it made anything is not named beside another")
	g.Expect(res[2].Sharing.Beside).To(Equal([]string{"a"}))
}

// Once an attempt fails because the cluster had no room for its pods, the
// jobs not yet started run one at a time, each with nothing beside it;
// the crowded attempt runs again alone, as any failure beside others.
func TestNoRoomNarrowsToOneAtATime(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	names := []string{"big", "b", "c", "d", "e"}
	var (
		mu       sync.Mutex
		changed  = sync.NewCond(&mu)
		active   int
		started  int
		bigDone  bool
		besideAt = map[string]int{} // by job, how many others ran as it began (its last attempt)
		order    []string
		logged   []string
	)
	run := func(ctx context.Context, i int, alone bool) *report.Result {
		name := names[i]
		mu.Lock()
		defer mu.Unlock()
		besideAt[name] = active
		active++
		started++
		order = append(order, name)
		changed.Broadcast()
		res := &report.Result{Run: &report.Run{Scenario: name}}
		switch {
		case name == "big" && !alone: // fails once b and c run beside it
			for started < 3 && ctx.Err() == nil {
				changed.Wait()
			}
			res.NoRoom = "0/1 nodes are available: 1 Insufficient cpu."
			res.Errors = []string{"the pods of RedisCluster big will not become ready by waiting"}
			bigDone = true
		case name == "b" || name == "c": // run on a while after big has failed beside them
			for !bigDone && ctx.Err() == nil {
				changed.Wait()
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond) // time enough for a free worker to start d, were it let
			mu.Lock()
		}
		active--
		changed.Broadcast()
		return res
	}
	jobs := make([]Job, len(names))
	for i, n := range names {
		jobs[i] = Job{Name: n}
	}
	res := Run(ctx, jobs, Options{Workers: 3, Run: run, Log: func(format string, args ...any) {
		logged = append(logged, fmt.Sprintf(format, args...))
	}})
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "the run ended by its deadline; started: %v", order)
	g.Expect(order).To(HaveLen(6), "big twice, the others once: %v", order)
	g.Expect(order[len(order)-1]).To(Equal("big"), "the crowded attempt runs again alone, last")
	g.Expect(besideAt).To(HaveKeyWithValue("d", 0), "d started after the narrowing, with nothing beside it")
	g.Expect(besideAt).To(HaveKeyWithValue("e", 0))
	g.Expect(besideAt).To(HaveKeyWithValue("big", 0))
	g.Expect(res[0].Verdict()).To(Equal(report.Passed))
	g.Expect(res[0].Sharing.FirstAttempt).To(ConsistOf(ContainSubstring("will not become ready")))
	g.Expect(logged).To(ContainElement(Equal("the cluster had no room for big's pods beside others (0/1 nodes are available: 1 Insufficient cpu.): the scenarios not yet started run one at a time")))
}
