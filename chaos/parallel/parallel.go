package parallel

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

// Job is one scenario of the run.
type Job struct {
	Name string
	// Alone is why the job cannot share the cluster ("" when it can).
	Alone string
}

// Options shape a run.
type Options struct {
	// Workers is how many jobs that share the cluster run at once (one or
	// less: one after another, as a serial run).
	Workers int
	// Run runs job i; alone is set on a second attempt made with nothing
	// beside it, whose evidence should not overwrite the first's.
	Run func(ctx context.Context, i int, alone bool) *report.Result
	// Done, if set, is called with each job's final result as it is
	// known, one call at a time. A neighbour skipped later is then taken
	// out of the result's Sharing.Beside, before the next call.
	Done func(i int, res *report.Result)
	// Log, if set, receives a line for each decision.
	Log func(format string, args ...any)
}

// Run runs the jobs and returns their final results in the jobs' order
// (nil for a job not started before ctx ended).
func Run(ctx context.Context, jobs []Job, o Options) []*report.Result {
	s := &schedule{o: o, jobs: jobs, results: make([]*report.Result, len(jobs)), running: map[int]bool{}, beside: map[int]map[int]bool{}}
	var shared, alone []int
	for i, j := range jobs {
		if j.Alone != "" && o.Workers > 1 {
			alone = append(alone, i)
			s.logf("%s runs alone: %s", j.Name, j.Alone)
			continue
		}
		shared = append(shared, i)
	}
	// Judge the failed attempts the pool left: one beside nothing stands,
	// one beside others runs again alone, after the jobs that run alone.
	var again []int
	for _, i := range s.pool(ctx, shared) {
		if len(s.beside[i]) == 0 {
			s.finish(i, s.results[i], nil)
			continue
		}
		again = append(again, i)
	}
	for _, i := range alone {
		if ctx.Err() != nil {
			break
		}
		s.finish(i, s.attempt(ctx, i, false), nil)
	}
	for _, i := range again {
		if ctx.Err() != nil {
			break
		}
		first := s.results[i]
		s.logf("%s failed beside %s: running it again alone", jobs[i].Name, strings.Join(s.names(i), ", "))
		s.finish(i, s.attempt(ctx, i, true), first)
	}
	return s.results
}

// schedule is one Run's state.
type schedule struct {
	o       Options
	jobs    []Job
	mu      sync.Mutex
	results []*report.Result
	running map[int]bool
	// beside are, by job, the jobs that ran while it ran.
	beside map[int]map[int]bool
}

// pool runs jobs, Workers at a time (one when Workers is less), and
// finishes each as it ends, but for a failed attempt when others may have
// run beside it: it records those and returns them, in the jobs' order,
// for Run to judge. Once an attempt fails because the cluster had no room
// for its pods, the jobs not yet started run one at a time: started
// beside others they would fail the same way, each then run again alone.
func (s *schedule) pool(ctx context.Context, jobs []int) []int {
	work := make(chan int)
	gate := newGate(max(s.o.Workers, 1))
	var failed []int
	var wg sync.WaitGroup
	for range max(s.o.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				gate.enter()
				res := s.attempt(ctx, i, false)
				gate.leave()
				if res.Verdict() != report.Failed || s.o.Workers <= 1 { // one at a time, nothing ran beside
					s.finish(i, res, nil)
					continue
				}
				if res.NoRoom != "" && gate.narrow() {
					s.logf("the cluster had no room for %s's pods beside others (%s): the scenarios not yet started run one at a time", s.jobs[i].Name, res.NoRoom)
				}
				s.mu.Lock()
				s.results[i] = res
				failed = append(failed, i)
				s.mu.Unlock()
			}
		}()
	}
	for _, i := range jobs {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	slices.Sort(failed)
	return failed
}

// gate bounds how many attempts run at once; narrow lowers the bound to
// one, for the attempts that enter after it.
type gate struct {
	mu        sync.Mutex
	free      *sync.Cond
	limit, in int
}

func newGate(limit int) *gate {
	g := &gate{limit: limit}
	g.free = sync.NewCond(&g.mu)
	return g
}

func (g *gate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.in >= g.limit {
		g.free.Wait()
	}
	g.in++
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.in--
	g.free.Broadcast()
}

// narrow lowers the bound to one; it reports whether that changed it.
func (g *gate) narrow() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.limit
	g.limit = 1
	return was > 1
}

// attempt runs job i, recording what runs beside it meanwhile.
func (s *schedule) attempt(ctx context.Context, i int, alone bool) *report.Result {
	s.mu.Lock()
	if s.beside[i] == nil {
		s.beside[i] = map[int]bool{}
	}
	for j := range s.running {
		s.beside[i][j], s.beside[j][i] = true, true
	}
	s.running[i] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, i)
		s.mu.Unlock()
	}()
	return s.o.Run(ctx, i, alone)
}

// finish records job i's final result; first is its failed attempt beside
// others when res is a second attempt alone.
//
// It names what ran beside job i as far as is known now, for Done's report
// to show; a neighbour still running may yet be skipped, and a skipped job
// made nothing to share, so a skip names again what ran beside each job
// already finished beside it.
func (s *schedule) finish(i int, res *report.Result, first *report.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[i] = res
	if s.o.Workers > 1 {
		sh := &report.Sharing{Alone: s.jobs[i].Alone}
		if first != nil {
			sh.Alone = "it failed beside others"
			sh.FirstAttempt = append(slices.Clone(first.Errors), first.Violations...)
		}
		res.Sharing = sh
		s.nameBesideLocked(i)
		if res.Verdict() == report.Skipped {
			for j := range s.beside[i] {
				s.nameBesideLocked(j)
			}
		}
	}
	if s.o.Done != nil {
		s.o.Done(i, res)
	}
}

// nameBesideLocked names what ran beside job i in its result, once final.
func (s *schedule) nameBesideLocked(i int) {
	if res := s.results[i]; res != nil && res.Sharing != nil {
		res.Sharing.Beside = s.namesLocked(i)
	}
}

func (s *schedule) names(i int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.namesLocked(i)
}

// namesLocked are the names of the jobs that ran beside job i, in the
// jobs' order, but for those known skipped.
func (s *schedule) namesLocked(i int) []string {
	var out []string
	for j := range s.jobs {
		if r := s.results[j]; r != nil && r.Verdict() == report.Skipped {
			continue // skipped before it made anything
		}
		if s.beside[i][j] {
			out = append(out, s.jobs[j].Name)
		}
	}
	return out
}

func (s *schedule) logf(format string, args ...any) {
	if s.o.Log != nil {
		s.o.Log(format, args...)
	}
}
