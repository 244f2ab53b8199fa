package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gauntlet-dev/gauntlet/chaos/relay"
	"github.com/gauntlet-dev/gauntlet/chaos/report"
)

func gauntlet(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// recordedRun writes a small run's report.json into a folder.
func recordedRun(t *testing.T, seed uint64, resume time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	rep := report.NewReport(seed, "kind-test")
	rep.Results = []*report.Result{
		{Run: &report.Run{Scenario: "leader-pod-kill", Seed: seed*1_000_003 + 0, Experiment: "PodChaos/pod-kill"},
			Figures: report.Figures{TimeToDegraded: 2 * time.Second, TimeToAvailable: time.Second, WritesResumeAfter: resume,
				LongestWriteGap: resume, Operations: 3000, Linearizable: "Ok"}},
		{Run: &report.Run{Scenario: "leader-delay-100ms", Skipped: "the node kernel lacks netem"}},
	}
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestUsageErrors(t *testing.T) {
	run := recordedRun(t, 7, 2*time.Second)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"chaso"}, `unknown command "chaso"`},
		{[]string{"run", "--seed", "-5"}, "--seed -5: want a non-negative integer"},
		{[]string{"run", "--seed", "abc"}, `invalid argument "abc"`},
		{[]string{"run", "--scenario", "no-such"}, "--scenario \"no-such\" matches no scenario; the scenarios are:\n  leader-pod-kill"},
		{[]string{"run", "--scenario", "leader-["}, "syntax error in pattern"},
		{[]string{"run", "-f", "/nonexistent.yaml"}, "stat /nonexistent.yaml"},
		{[]string{"run", "--kubeconfig", "/nonexistent"}, "--kubeconfig: stat /nonexistent"},
		{[]string{"run", "--kind-config", "/nonexistent.yaml"}, "--kind-config: stat /nonexistent.yaml"},
		{[]string{"run", "--timeout", "0s"}, "--timeout 0s: want a positive duration"},
		{[]string{"run", "--kubernetes-version", "1.29"}, `--kubernetes-version: no kind node image known for Kubernetes "1.29": give one of 1.35, 1.36, 1.37`},
		{[]string{"run", "--kubernetes-version", "1.36", "--node-image", "kindest/node:v1.36.1"}, "[kubernetes-version node-image] were all set"},
		{[]string{"run", "--offline", "--node-image", "kindest/node:v1.36.1"}, "[node-image offline] were all set"},
		{[]string{"run", "--multi-node", "--kind-config", "/dev/null"}, "[kind-config multi-node] were all set"},
		{[]string{"run", "--proxy-address", "172.18.0.1"}, "--proxy-address goes with --kubeconfig"},
		{[]string{"run", "--kubeconfig", "/dev/null", "--proxy-address", "gateway"}, `--proxy-address "gateway": want the IP address`},
		{[]string{"run", "--parallel", "0"}, "--parallel 0: give 1 (one scenario after another) or more"},
		{[]string{"run", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"run", "extra"}, `unknown command "extra" for "gauntlet run"`},
		{[]string{"report"}, "want 1 arguments ([DIR]), got 0"},
		{[]string{"report", "/nonexistent"}, "stat /nonexistent"},
		{[]string{"report", t.TempDir()}, "is not a chaos run's folder"},
		{[]string{"replay", run, "no-such"}, "has no scenario \"no-such\"; it ran:\n  leader-pod-kill\n  leader-delay-100ms"},
		{[]string{"compare", run}, "want 2 arguments ([A B]), got 1"},
		{[]string{"run", "-f", "../../chaos/scenario/testdata/invalid/unknown-field.yaml"}, `unknown-field.yaml:27: spec.fault.acton: unknown field (did you mean "action"?)`},
		{[]string{"run", "-f", "../../chaos/scenario/testdata/reference/leader-partition.yaml"}, "no Operator file"},
		{[]string{"run", "-f", "../../suites/chaos/scenarios", "--scenario", "nope"}, "--scenario \"nope\" matches no scenario; the scenarios are:\n  leader-pod-kill"},
		{[]string{"explore", "--shards", "1"}, "--shards 1: give 2 or more"},
		{[]string{"run", "--push-to", "127.0.0.1:5001"}, "--push-to goes with --kubeconfig"},
		{[]string{"run", "--kubeconfig", "/dev/null", "--push-to", "http://r:5001"}, `--push-to "http://r:5001": want a registry's host[:port]`},
		{[]string{"run", "--chaos-mesh-registry", "https://ghcr.io"}, `--chaos-mesh-registry "https://ghcr.io": want a registry's host[:port] and an optional path`},
		{[]string{"explore", "--shards", "2"}, "--shards runs on a cluster: give --kind"},
		{[]string{"explore", "--shards", "2", "--kind", "--parallel", "-1"}, "--parallel -1: give a positive number"},
		{[]string{"explore", "--shards", "2", "--kind", "--shard-image", "x:1"}, "--shard-image is for --kubeconfig's cluster"},
		{[]string{"explore", "--shards", "2", "--kind", "--shard-memory", "lots"}, `--shard-memory "lots"`},
		{[]string{"explore", "--shard", "3/2"}, `--shard: shard "3/2": want k/n with 0 <= k < n`},
		{[]string{"explore", "--publish"}, "--publish is for a shard's pod"},
		{[]string{"bench", "bugs", "-f", "x.yaml", "--shards", "1"}, "--shards 1: give 2 or more"},
		{[]string{"bench", "bugs", "-f", "x.yaml", "--multi-node"}, "--multi-node goes with --shards or --job"},
		{[]string{"bench", "bugs", "-f", "x.yaml", "--job", "--kind"}, "--job runs each campaign on envtest in its own pod"},
		{[]string{"bench", "bugs", "-f", "x.yaml", "--parallel", "2"}, "--kubeconfig, --shard-image and --parallel go with --job"},
		{[]string{"bench", "bugs", "-f", "x.yaml", "--job", "--shard-image", "x:1"}, "--shard-image is for --kubeconfig's cluster"},
		{[]string{"bench", "bugs", "--plan", "plan.json"}, "--plan goes with --campaign k"},
		{[]string{"bench", "bugs", "-f", "../../suites/bugbench/reference.yaml", "--expect", "../../README.md", "--only-expected"}, "README.md marks found none of the bugs of ../../suites/bugbench/reference.yaml here"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			code, _, stderr := gauntlet(c.args...)
			g.Expect(code).To(Equal(2), stderr)
			g.Expect(stderr).To(ContainSubstring(c.want))
			g.Expect(stderr).To(ContainSubstring("--help' for usage."))
		})
	}
}

func TestSelectScenarios(t *testing.T) {
	g := NewWithT(t)
	f := &runFlags{}
	all, err := f.names()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(15), "the reference operator's scenario files, by default in a checkout")
	got, err := selectFrom(all, []string{"*-partition", "leader-pod-kill", "minority-partition"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]string{"leader-pod-kill", "leader-partition", "minority-partition"}), "in the files' order, once each")
}

func TestList(t *testing.T) {
	g := NewWithT(t)
	code, out, stderr := gauntlet("list")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(out).To(And(ContainSubstring("leader-pod-kill"), ContainSubstring("upgrade-under-minority-pod-kill"),
		MatchRegexp(`leader-delay-100ms\s+delay on leader\s+100 ms of latency`)))
	code, out, stderr = gauntlet("list", "-f", "../../chaos/scenario/testdata/reference")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(strings.Count(out, "\n")).To(Equal(3))
}

func TestReportRerenders(t *testing.T) {
	g := NewWithT(t)
	dir := recordedRun(t, 7, 2*time.Second)
	g.Expect(os.Remove(filepath.Join(dir, "summary.md"))).To(Succeed())
	code, out, stderr := gauntlet("report", dir)
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(out).To(ContainSubstring("| leader-pod-kill | passed |"))
	g.Expect(out).To(ContainSubstring("report: " + filepath.Join(dir, "report.html")))
	for _, f := range []string{"report.html", "summary.md", "junit.xml"} {
		g.Expect(filepath.Join(dir, f)).To(BeAnExistingFile())
	}

	// A report that does not match the schema is refused with where.
	g.Expect(os.WriteFile(filepath.Join(dir, "report.json"), []byte(`{"apiVersion":"gauntlet.dev/v1alpha1","kind":"ChaosReport","seed":"x"}`), 0o644)).To(Succeed())
	code, _, stderr = gauntlet("report", dir)
	g.Expect(code).To(Equal(1))
	g.Expect(stderr).To(ContainSubstring("report does not match schema"))
	g.Expect(stderr).To(ContainSubstring("at '/seed'"))
}

func TestCompare(t *testing.T) {
	g := NewWithT(t)
	a, b := recordedRun(t, 7, 2*time.Second), recordedRun(t, 8, 3*time.Second)
	code, out, stderr := gauntlet("compare", a, b)
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(out).To(MatchRegexp(`A \(seed 7\)\s+B \(seed 8\)`))
	g.Expect(out).To(MatchRegexp(`writes resume\s+2s\s+3s\s+\+1s \(\+50%\)`))
	g.Expect(out).To(MatchRegexp(`ops checked\s+3000\s+3000\s+=`))
	g.Expect(out).To(MatchRegexp(`leader-delay-100ms\s+verdict\s+skipped\s+skipped\s+=`))

	one := recordedRun(t, 9, time.Second)
	rep, err := report.ReadReport(one)
	g.Expect(err).NotTo(HaveOccurred())
	rep.Results = rep.Results[:1]
	g.Expect(rep.Write(one)).To(Succeed())
	code, out, stderr = gauntlet("compare", a, one)
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(out).To(MatchRegexp(`leader-delay-100ms\s+verdict\s+skipped\s+absent\s+only in A`))
}

func TestChanges(t *testing.T) {
	g := NewWithT(t)
	g.Expect(durChange(2*time.Second, time.Second)).To(Equal("-1s (-50%)"))
	g.Expect(durChange(-1, time.Second)).To(Equal("changed"), "never happened, then did")
	g.Expect(durChange(-1, -1)).To(Equal("="))
	g.Expect(durChange(0, time.Second)).To(Equal("+1s"))
	g.Expect(numChange(0, 3)).To(Equal("+3"))
	g.Expect(numChange(4, 3)).To(Equal("-1 (-25%)"))
}

func TestCompletion(t *testing.T) {
	g := NewWithT(t)
	code, out, stderr := gauntlet("completion", "bash")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(out).To(ContainSubstring("__start_gauntlet"))
	code, out, _ = gauntlet("__complete", "run", "--scenario", "leader-")
	g.Expect(code).To(Equal(0))
	g.Expect(out).To(ContainSubstring("leader-partition"), "scenario names complete")
}

func TestValidate(t *testing.T) {
	g := NewWithT(t)
	code, out, stderr := gauntlet("validate", "-f", "../../chaos/scenario/testdata/reference")
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(out).To(ContainSubstring("valid: operator databasecluster-operator"))
	g.Expect(out).To(ContainSubstring("leader-partition (../../chaos/scenario/testdata/reference/leader-partition.yaml): partition on leader"))

	code, _, stderr = gauntlet("validate", "-f", "../../chaos/scenario/testdata/invalid/unknown-field.yaml,../../chaos/scenario/testdata/invalid/bad-duration.yaml")
	g.Expect(code).To(Equal(1))
	g.Expect(stderr).To(ContainSubstring(`unknown-field.yaml:27: spec.fault.acton: unknown field (did you mean "action"?)`))
	g.Expect(stderr).To(ContainSubstring(`bad-duration.yaml:30: spec.fault.hold: "20 seconds" is not a duration`))
	g.Expect(stderr).To(ContainSubstring("2 mistakes"))

	code, _, stderr = gauntlet("validate")
	g.Expect(code).To(Equal(2))
	g.Expect(stderr).To(ContainSubstring("-f is required"))
}

// Mistakes only the rendered manifests and the CRD's schema reveal are
// refused by validate, each at its line, before any cluster.
func TestPreflight(t *testing.T) {
	g := NewWithT(t)
	code, _, stderr := gauntlet("validate", "-f", "../../chaos/scenario/testdata/preflight")
	g.Expect(code).To(Equal(1), stderr)
	for _, want := range []string{
		`operator.yaml:11: spec.images[0].replaces: "example.com/cache-operater" (with any tag) is the image of no container in the operator's manifests; they run "example.com/cache-operator:v1"`,
		`operator.yaml:13: spec.selector: app=cache-operater selects no pod template of the operator's manifests in cache-system (Deployment cache-operator: app=cache-operator)`,
		`scale-up.yaml:7: spec.resource.manifest: cache.yaml: field spec.colour is not in the schema of Cache v1`,
		`scale-up.yaml:9: spec.resource.converged[0]: at 1:39: undefined field 'sizee'`,
		`scale-up.yaml:11: spec.resource.converged[2]: at 1:12: undefined field 'observedGeneration'`,
		"5 mistakes",
	} {
		g.Expect(stderr).To(ContainSubstring(want))
	}
	// --set is taken as gauntlet run takes it.
	code, _, stderr = gauntlet("validate", "-f", "../../chaos/scenario/testdata/reference", "--set", "OPERATOR_IMAGE=registry.example/op:v2")
	g.Expect(code).To(Equal(0), stderr)
}

// A run builds the checkout's images only when the Operator file loads one
// of them: the Memcached example's run builds Chaos Mesh's and the node
// image, not the reference operator's.
func TestImageTargets(t *testing.T) {
	g := NewWithT(t)
	targets := func(dir string) []string {
		f := &runFlags{files: []string{dir}, nodeImage: "gauntlet.dev/kind-node:v1.35.4",
			chaosController: "gauntlet.dev/chaos-controller-manager:v1", chaosDaemon: "gauntlet.dev/chaos-daemon:v1"}
		g.Expect(f.load()).To(Succeed())
		return imageTargets(f)
	}
	g.Expect(targets("../../suites/chaos/scenarios")).To(Equal([]string{"operator-image", "etcd-images", "chaos-images", "node-image", "KIND_NODE_VERSION=v1.35.4"}))
	g.Expect(targets("../../suites/examples/memcached/scenarios")).To(Equal([]string{"chaos-images", "node-image", "KIND_NODE_VERSION=v1.35.4"}))

	// --proxy-relay builds the relay's image, for files with view faults.
	relayed := func(dir string) []string {
		f := &runFlags{files: []string{dir}, nodeImage: "kindest/node:v1.35.0", chaosController: "x", chaosDaemon: "x",
			proxyRelay: true, relayImage: relay.Image}
		g.Expect(f.load()).To(Succeed())
		return imageTargets(f)
	}
	g.Expect(relayed("../../suites/examples/memcached/view-scenarios")).To(Equal([]string{"relay-image"}))
	g.Expect(relayed("../../suites/examples/memcached/scenarios")).To(BeEmpty(), "no view faults, no relay")
}

// The relay image make relay-image tags is the one the CLI deploys.
func TestRelayImageTag(t *testing.T) {
	g := NewWithT(t)
	mk, err := os.ReadFile("../../Makefile")
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^RELAY_VERSION := (\S+)$`).FindSubmatch(mk)
	g.Expect(m).NotTo(BeNil(), "RELAY_VERSION in the Makefile")
	g.Expect(relay.Image).To(Equal("gauntlet.dev/api-relay:v" + string(m[1])))
}

func TestMirrorName(t *testing.T) {
	for image, want := range map[string]string{
		"gauntlet.dev/etcd:v3.6.16":                     "127.0.0.1:5001/etcd:v3.6.16",
		"gauntlet.dev/chaos-daemon:v0.9.1-47411975a8cb": "127.0.0.1:5001/chaos-daemon:v0.9.1-47411975a8cb",
		"example.com/team/op:dev":                       "127.0.0.1:5001/team/op:dev",
		"busybox":                                       "127.0.0.1:5001/library/busybox:latest",
		"registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097": "127.0.0.1:5001/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097",
	} {
		got, err := mirrorName(image, "127.0.0.1:5001")
		if err != nil || got != want {
			t.Errorf("mirrorName(%s) = %s, %v; want %s", image, got, err, want)
		}
	}
	if _, err := mirrorName("UPPER/case:tag", "r:1"); err == nil {
		t.Error("mirrorName took an image name with capitals")
	}
}

// Objects of kinds nothing here serves (the Prometheus operator's) are a
// note of validate's, and stop a run on a cluster made here before it is
// made.
func TestUnservedKinds(t *testing.T) {
	g := NewWithT(t)
	dir := "../../chaos/preflight/testdata/unserved"
	code, stdout, stderr := gauntlet("validate", "-f", dir)
	g.Expect(code).To(Equal(0), stderr)
	g.Expect(stdout).To(ContainSubstring("note: the manifests hold kinds that Kubernetes does not serve and no CRD among them defines"))
	g.Expect(stdout).To(ContainSubstring("monitoring.coreos.com/v1 PodMonitor (cache-system/pods); monitoring.coreos.com/v1 ServiceMonitor"))
	g.Expect(stdout).NotTo(ContainSubstring("cert-manager"), "a run stands in for cert-manager")

	start := time.Now()
	code, _, stderr = gauntlet("run", "-f", dir, "--report", t.TempDir())
	g.Expect(code).To(Equal(2), stderr)
	g.Expect(stderr).To(ContainSubstring("A cluster made here serves none of them: leave them out with the Operator file's spec.exclude (- kind: PodMonitor)"))
	g.Expect(stderr).To(ContainSubstring("monitoring.coreos.com/v1 ServiceMonitor (cache-system/cache-metrics, cache-system/node-metrics)"))
	g.Expect(stderr).NotTo(ContainSubstring("cluster"+" created"), "refused before any cluster")
	t.Logf("refused in %s", time.Since(start))
}
