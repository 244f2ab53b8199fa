package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
	"github.com/gauntlet-dev/gauntlet/chaos/workload"
	"github.com/gauntlet-dev/gauntlet/framework"
)

// defaultBaseline is how long the etcd-kv workload runs before the fault
// is requested, to measure its fault-free rate.
const defaultBaseline = 10 * time.Second

// writeStall is the shortest stretch without an acknowledged write that
// counts as writes having stopped: longer than one failover of the
// workload's clients (a 750 ms timeout on a member being replaced, then the
// next member), so that a client moving on is not taken for etcd stopping.
const writeStall = 2 * time.Second

// workloadOpTimeout bounds one workload operation: well above a healthy
// write here (tens of milliseconds), well under etcd's failover time.
const workloadOpTimeout = 750 * time.Millisecond

// startWorkload starts the scenario's workload, if any: an etcd-kv one
// now, run fault-free for its baseline before it returns; a command one
// later, from during, once the fault's targets are known. It returns the
// etcd-kv workload (nil for any other).
// The workload's waits: its first writes come within a minute of a
// healthy cluster's (etcd elects in seconds; a minute covers a member
// still joining); the read-back of every acknowledged key gets two
// minutes, each read bounded by the Failover's ReadTimeout; porcupine's
// search is cut at a minute, past which the history is reported as
// unknown rather than waited on.
const (
	firstWritesWithin     = time.Minute
	readBackWithin        = 2 * time.Minute
	linearizabilityBudget = time.Minute
)

func (r *run) startWorkload(ctx context.Context, seed uint64) (*workload.Workload, error) {
	w := r.s.Spec.Workload
	switch {
	case w != nil && w.Kind == scenario.WorkloadEtcdKV:
		load, err := r.startEtcdKV(ctx, w, seed)
		if err != nil {
			return nil, fmt.Errorf("starting the workload: %w", err)
		}
		if err := r.baseline(ctx, w); err != nil {
			return nil, err
		}
		return load, nil
	case w != nil && w.Kind == scenario.WorkloadCommand:
		r.command = make(chan commandResult, 1) // started by during
	}
	return nil, nil
}

// baseline lets the workload run fault-free for the scenario's baseline
// before the fault is requested: its rate there is what the operations
// during the fault are compared with.
func (r *run) baseline(ctx context.Context, w *scenario.Workload) error {
	d := defaultBaseline
	if w.Baseline != nil {
		d = w.Baseline.Duration
	}
	r.e.logf("%s: workload running fault-free for %s (baseline)", r.s.Metadata.Name, d)
	select {
	case <-ctx.Done():
		return fmt.Errorf("interrupted during the workload's baseline: %w", ctx.Err())
	case <-time.After(d):
		return nil
	}
}

// How the workload's clients meet a member: a dial gives up after
// memberDialTimeout and a quiet connection is probed every
// memberKeepAlive; a member that fails is avoided for memberBackoff,
// doubling up to memberMaxBackoff while it keeps failing; the read-back
// gives each member memberReadTimeout, since a member scaled away during
// the run hangs every read sent to it and must not starve the others.
const (
	memberDialTimeout = 5 * time.Second
	memberKeepAlive   = 2 * time.Second
	memberBackoff     = time.Second
	memberMaxBackoff  = 8 * time.Second
	memberReadTimeout = 2 * time.Second
)

// startEtcdKV opens a tunnel to each pod of the endpoints role and starts
// the key-value workload through them.
func (r *run) startEtcdKV(ctx context.Context, w *scenario.Workload, seed uint64) (*workload.Workload, error) {
	pods, err := r.roles.pods(ctx, w.Endpoints.Role)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.closer = append(r.closer, cancel)
	var endpoints []string
	for _, p := range pods.Names {
		t, err := framework.OpenTunnel(tctx, r.e.Config, pods.Namespace, p, int(w.Endpoints.Port))
		if err != nil {
			return nil, err
		}
		endpoints = append(endpoints, t.Addr)
	}
	// One client per member, failing over between them like an etcd client
	// with every endpoint: a member cut off from the leader refuses at once
	// (RequireLeader) or times out within OpTimeout, and is then avoided for
	// a second, doubling up to 8 s while it keeps failing and probed by one
	// operation at a time, so the workload measures etcd, not its own
	// waiting.
	var replicas []workload.KV
	for _, ep := range endpoints {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: memberDialTimeout, Logger: zap.NewNop(),
			DialKeepAliveTime: memberKeepAlive, DialKeepAliveTimeout: memberKeepAlive})
		if err != nil {
			return nil, err
		}
		r.closer = append(r.closer, func() { _ = cli.Close() })
		replicas = append(replicas, workload.EtcdKV{Client: cli, RequireLeader: true})
	}
	kv := &workload.Failover{Replicas: replicas, Backoff: memberBackoff, MaxBackoff: memberMaxBackoff,
		ReadTimeout: memberReadTimeout}
	load := workload.Start(ctx, kv, workload.Config{Clients: w.Clients, Keys: w.Keys, Seed: seed,
		OpTimeout: workloadOpTimeout, Prefix: "gauntlet/chaos/" + r.s.Metadata.Name + "/"})
	r.closer = append(r.closer, func() { load.Stop() })
	err = framework.PollFor(ctx, "the workload's first acknowledged writes", firstWritesWithin, 100*time.Millisecond, func(context.Context) (bool, string, error) {
		n, last := 0, ""
		for _, op := range load.Snapshot() {
			if op.Kind == workload.KindPut && op.Outcome == workload.OK {
				n++
			}
			last = op.Error
		}
		return n >= 20, fmt.Sprintf("%d acknowledged writes, last error %q", n, last), nil
	})
	if err != nil {
		return nil, err
	}
	r.kv = kv
	return load, nil
}

// workloadChecks verifies the data and bounds the workload's figures. It
// runs beside the operator's checks (judge), so it returns its checks
// rather than adding them to the result, and of the figures it writes only
// the workload's.
func (r *run) workloadChecks(ctx context.Context, ledger *workload.Ledger) ([]report.Check, error) {
	var out []report.Check
	f := &r.res.Figures
	counts := ledger.Counts()
	f.AckedWrites, f.AmbiguousWrites = counts.AckedWrites, counts.AmbiguousWrites
	vctx, cancel := context.WithTimeout(ctx, readBackWithin)
	_, lost, err := ledger.VerifyDurability(vctx, r.kv)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("reading back the acknowledged writes: %w", err)
	}
	f.WritesLost = len(lost)
	c := report.Check{Kind: "workload", Name: "acknowledged writes lost", Value: fmt.Sprint(len(lost)), Budget: "0"}
	if len(lost) > 0 {
		c.Violation = fmt.Sprintf("%d acknowledged writes lost, the first %s=%s (revision %d): %s", len(lost), lost[0].Op.Key, lost[0].Op.Value, lost[0].Op.Revision, lost[0].Reason)
	}
	out = append(out, c)
	lin, err := ledger.CheckLinearizable(linearizabilityBudget, r.res.Artifacts)
	if err != nil {
		return nil, fmt.Errorf("checking linearizability: %w", err)
	}
	f.Linearizable, f.Operations = string(lin.Result), lin.Operations
	c = report.Check{Kind: "workload", Name: "history linearizable", Value: f.Linearizable, Budget: "Ok"}
	if f.Linearizable != "Ok" {
		c.Violation = "history not proven linearizable: " + f.Linearizable
	}
	out = append(out, c)

	ph := r.res.Phases
	f.OpsDuringFault = ledger.Acknowledged(ph.Injected.Sub(ledger.Start), ph.Healed.Sub(ledger.Start))
	if base := ph.Requested.Sub(ledger.Start); base >= time.Second {
		rate := float64(ledger.Acknowledged(0, base)) / base.Seconds()
		f.FaultFreeOps = int(math.Round(rate * ph.Healed.Sub(ph.Injected).Seconds()))
	}
	inj := ph.Requested
	gap, resumed := ledger.LongestWriteGap(inj.Sub(ledger.Start), r.res.Phases.Converged.Sub(ledger.Start))
	f.LongestWriteGap = gap
	if gap >= writeStall {
		f.WritesResumeAfter = resumed - inj.Sub(ledger.Start)
	}
	wa := r.s.Spec.Assertions.Workload
	if wa == nil {
		return out, nil
	}
	if wa.WritesResumeWithin.Duration > 0 {
		c := report.Check{Kind: "workload", Name: "writes resume after the fault", Value: report.FormatDuration(f.WritesResumeAfter), Budget: "≤ " + wa.WritesResumeWithin.Duration.String()}
		if f.WritesResumeAfter > wa.WritesResumeWithin.Duration {
			c.Violation = fmt.Sprintf("writes resumed %s after the fault, over the budget of %s", report.FormatDuration(f.WritesResumeAfter), wa.WritesResumeWithin.Duration)
		}
		out = append(out, c)
	}
	if share := wa.MinFaultFreeShare; share != nil {
		c := report.Check{Kind: "workload", Name: "operations during the fault, against a fault-free stretch as long",
			Value: fmt.Sprintf("%d of %d", f.OpsDuringFault, f.FaultFreeOps), Budget: fmt.Sprintf("≥ %.0f%%", *share*100)}
		switch {
		case f.FaultFreeOps == 0:
			c.Violation = "no fault-free rate was measured before the fault (the workload acknowledged nothing in its baseline)"
		case float64(f.OpsDuringFault) < *share*float64(f.FaultFreeOps):
			c.Violation = fmt.Sprintf("%d operations acknowledged during the fault, %.0f%% of the %d a fault-free stretch as long gives (at least %.0f%% needed)",
				f.OpsDuringFault, 100*float64(f.OpsDuringFault)/float64(f.FaultFreeOps), f.FaultFreeOps, *share*100)
		}
		out = append(out, c)
	}
	if wa.MinOperations > 0 {
		c := report.Check{Kind: "workload", Name: "operations checked", Value: fmt.Sprint(f.Operations), Budget: fmt.Sprintf("≥ %d", wa.MinOperations)}
		if f.Operations < wa.MinOperations {
			c.Violation = fmt.Sprintf("only %d operations checked (at least %d needed)", f.Operations, wa.MinOperations)
		}
		out = append(out, c)
	}
	return out, nil
}

// commandResult is how the workload command ended: where it ran, what
// it printed, and its error (a non-zero exit included).
type commandResult struct {
	pod string
	out framework.ExecResult
	err error
}

// commandShown bounds the last line of the command's output in its check:
// a client's summary (counts of writes, failures, losses) fits.
const commandShown = 240

// commandOutputFile holds the workload command's whole output, in the
// run's artifacts.
const commandOutputFile = "workload-command.txt"

// check judges the command by its exit status and shows the last line it
// printed; its whole output goes to dir (the run's artifacts), named in
// the check when the command failed.
func (c commandResult) check(dir string) report.Check {
	ch := report.Check{Kind: "workload", Name: "workload command in " + c.pod, Value: "exit 0", Budget: "exit 0"}
	last := lastLine(c.out.Stdout, commandShown)
	saved := ""
	if dir != "" && c.pod != "" {
		text := fmt.Sprintf("# %s\n## stdout\n%s\n## stderr\n%s\n", c.pod, c.out.Stdout, c.out.Stderr)
		if os.MkdirAll(dir, 0o755) == nil && os.WriteFile(filepath.Join(dir, commandOutputFile), []byte(text), 0o644) == nil {
			saved = filepath.Join(dir, commandOutputFile)
		}
	}
	if last != "" {
		ch.Value += ": " + last
	}
	if c.err != nil {
		ch.Value = c.err.Error()
		if last != "" {
			ch.Value += "; its last output: " + last
		}
		ch.Violation = "the workload command failed: " + ch.Value
		if saved != "" {
			ch.Violation += " (its whole output: " + saved + ")"
		}
	}
	return ch
}

// startCommand runs the workload command, from the moment the fault is
// injected, in the first pod of its role as the fault's resolution sees it;
// its result arrives on r.command.
func (r *run) startCommand(ctx context.Context, c *scenario.Command) {
	res := r.faultRoles
	if res == nil {
		res = r.roles.snapshot()
	}
	pods, err := res.pods(ctx, c.Role)
	if err == nil && len(pods.Names) == 0 {
		err = fmt.Errorf("role %q has no pod to run the workload command in", c.Role)
	}
	if err != nil {
		r.command <- commandResult{err: err}
		return
	}
	pod := pods.Namespace + "/" + pods.Names[0]
	r.e.logf("%s: workload command %q in %s", r.s.Metadata.Name, firstLine(strings.Join(c.Command, " "), 60), pod)
	go func() {
		out, err := framework.Exec(ctx, r.e.Config, pods.Namespace, pods.Names[0], c.Container, c.Command...)
		r.command <- commandResult{pod: pod, out: out, err: err}
	}()
}

// lastLine is the last non-blank line of s, cut to at most n bytes (n <= 0: not cut).
func lastLine(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return cut(strings.TrimSpace(lines[len(lines)-1]), n)
}

// firstLine is the first line of s, cut to at most n bytes.
func firstLine(s string, n int) string {
	first, rest, _ := strings.Cut(s, "\n")
	if rest != "" {
		first += " …"
	}
	return cut(first, n)
}

// cut keeps the first n characters of s (runes, not bytes: a cut inside
// one would print as escapes).
func cut(s string, n int) string {
	if r := []rune(s); n > 0 && len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
