package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"
)

// maxHold bounds a fault's hold: a longer one is a soak, not a scenario.
const maxHold = 10 * time.Minute

var (
	variableName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	// variableUse is what the engine substitutes: ${NAME} in capitals.
	// Anything else in ${...} is left alone, so a shell command can say
	// ${line%x} or ${n}.
	variableUse = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}`)
	bandwidth   = regexp.MustCompile(`^[1-9][0-9]*(bps|kbps|mbps|gbps)$`)
	metricName  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	pickCount   = regexp.MustCompile(`^[1-9][0-9]*$`)
)

// celEnv compiles the CEL expressions over the resource (self).
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType))
	if err != nil {
		panic(err)
	}
	return env
}()

// CompileCEL compiles an expression over the resource (self) into a
// program: the engine runs exactly what the file checks compiled.
func CompileCEL(expr string) (cel.Program, error) {
	ast, iss := celEnv.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	return celEnv.Program(ast)
}

func (c *checker) cel(path, expr string) {
	if strings.TrimSpace(expr) == "" {
		c.at(path, "an empty CEL expression")
		return
	}
	ast, iss := celEnv.Compile(expr)
	if iss != nil && iss.Err() != nil {
		c.at(path, "CEL does not compile: %s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
		return
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		c.at(path, "CEL must give a bool, not %s", t)
	}
}

func (c *checker) metadata(m Metadata) {
	if m.Name == "" {
		c.at("metadata.name", "required")
		return
	}
	for _, msg := range validation.IsDNS1123Label(m.Name) {
		c.at("metadata.name", "%q is not a DNS label (it names the scenario's namespace): %s", m.Name, msg)
	}
	if len(m.Name) > 50 {
		c.at("metadata.name", "%q is %d characters; at most 50 leave room for the namespace's prefix and sequence", m.Name, len(m.Name))
	}
}

// relFile checks that a path, absolute or relative to dir, names a
// readable file (or, for a kustomization, a directory).
func (c *checker) relFile(path, rel, dir string) {
	if rel == "" {
		c.at(path, "required")
		return
	}
	if variableUse.MatchString(rel) {
		return // known at run time (--set, the environment): gauntlet run and validate check it then
	}
	fi, err := os.Stat(Beside(dir, rel))
	switch {
	case err != nil:
		c.at(path, "%s: no such file (paths are relative to this file)", rel)
	case fi.IsDir() && !strings.HasSuffix(path, "kustomize"):
		c.at(path, "%s is a directory, want a file", rel)
	case !fi.IsDir() && strings.HasSuffix(path, "kustomize"):
		c.at(path, "%s is a file, want a kustomization directory", rel)
	}
}

func (c *checker) scenario(s *Scenario, dir string) {
	c.metadata(s.Metadata)
	sp := &s.Spec
	var manifests []string
	if sp.Resource.Manifest != "" {
		manifests = append(manifests, Beside(dir, sp.Resource.Manifest))
	}
	c.variables(sp.Variables, sp, manifests...)

	r := sp.Resource
	c.relFile("spec.resource.manifest", r.Manifest, dir)
	if r.Manifest != "" {
		c.manifest("spec.resource.manifest", filepath.Join(dir, r.Manifest))
	}
	if len(r.Converged) == 0 {
		c.at("spec.resource.converged", "required: at least one CEL expression over the resource (self) that holds once it converged")
	}
	for i, e := range r.Converged {
		c.cel(fmt.Sprintf("spec.resource.converged[%d]", i), e)
	}

	c.podSecurity("spec.podSecurity", sp.PodSecurity)
	c.roles(sp.Roles)
	c.fault(sp)
	recreated := false
	for _, list := range []struct {
		name    string
		actions []Action
	}{{"before", sp.Before}, {"during", sp.During}} {
		for i, a := range list.actions {
			p := fmt.Sprintf("spec.%s[%d]", list.name, i)
			n := 0
			for _, set := range []bool{a.Patch != nil, a.DeletePods != nil, a.Recreate, a.Converge} {
				if set {
					n++
				}
			}
			switch {
			case n != 1:
				c.at(p, "set exactly one of patch, deletePods, recreate or converge")
			case a.DeletePods != nil:
				c.roleRef(p+".deletePods.role", a.DeletePods.Role, sp.Roles, false)
			case a.Recreate && list.name == "before":
				recreated = true
			}
		}
	}
	if sp.Fault.StaleFrom == StaleFromDeleted && !recreated {
		c.at("spec.fault.staleFrom", "%q needs a before step that recreates the resource (before: [{recreate: true}])", StaleFromDeleted)
	}
	if w := sp.Workload; w != nil {
		c.workload(w, sp.Roles)
	}
	c.assertions(sp)
}

// variables checks the names, and that every ${NAME} used in spec or in
// the files it reads is defined.
func (c *checker) variables(vars map[string]string, spec any, files ...string) {
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !variableName.MatchString(k) {
			c.at("spec.variables."+k, "%q: a variable's name is upper case letters, digits and _", k)
		}
	}
	raw, err := sigsyaml.Marshal(spec)
	if err != nil {
		return
	}
	text := string(raw)
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			text += string(b)
		}
	}
	seen := map[string]bool{}
	for _, m := range variableUse.FindAllStringSubmatch(text, -1) {
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		if _, ok := vars[name]; !ok && !slices.Contains(EngineVariables, name) {
			c.at("spec.variables", "${%s} is used but not defined here (give it a default)", name)
		}
	}
}

// manifest checks that a manifest holds one Kubernetes object.
func (c *checker) manifest(path, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		return // reported by file
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := sigsyaml.Unmarshal(b, &obj); err != nil {
		c.at(path, "%s is not a YAML object: %v", filepath.Base(file), err)
		return
	}
	if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata.Name == "" {
		c.at(path, "%s: want one Kubernetes object with apiVersion, kind and metadata.name", filepath.Base(file))
	}
}

func (c *checker) roles(roles map[string]Role) {
	names := make([]string, 0, len(roles))
	for k := range roles {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		r := roles[name]
		p := "spec.roles." + name
		for _, msg := range validation.IsDNS1123Label(name) {
			c.at(p, "a role's name is a DNS label: %s", msg)
		}
		set := 0
		for _, b := range []bool{len(r.Pods) > 0, r.Owned, r.From != "", r.Operator, r.APIServer} {
			if b {
				set++
			}
		}
		if set != 1 {
			c.at(p, "set exactly one of pods, owned, from, operator or apiServer")
			continue
		}
		if r.From != "" {
			c.roleRef(p+".from", r.From, roles, false)
			if r.From == name {
				c.at(p+".from", "a role cannot narrow itself")
			}
		}
		for i, ex := range r.Exclude {
			c.roleRef(fmt.Sprintf("%s.exclude[%d]", p, i), ex, roles, false)
		}
		if r.APIServer && (r.Probe != nil || r.Pick != "" || len(r.Exclude) > 0) {
			c.at(p, "an apiServer role is addresses, not pods: it takes no probe, pick or exclude")
		}
		if r.Probe != nil {
			switch pr := r.Probe; {
			case pr.Exec != nil && (pr.Port != 0 || pr.Path != ""):
				c.at(p+".probe", "set exec, or port and path, not both")
			case pr.Exec != nil:
				if len(pr.Exec.Command) == 0 {
					c.at(p+".probe.exec.command", "required: the command and its arguments")
				}
			default:
				c.port(p+".probe.port", pr.Port)
				if !strings.HasPrefix(pr.Path, "/") {
					c.at(p+".probe.path", "%q: want an absolute path such as /metrics", pr.Path)
				}
			}
			if r.Probe.Contains == "" {
				c.at(p+".probe.contains", "required: what the answer of the pods this role keeps contains")
			}
		}
		switch {
		case r.Pick == "", r.Pick == "all", r.Pick == "one", r.Pick == "minority", pickCount.MatchString(r.Pick):
		default:
			c.at(p+".pick", "%q: want all, one, minority or a count such as 2", r.Pick)
		}
	}
	c.cycles(roles)
}

// cycles refuses roles that narrow each other in a circle.
func (c *checker) cycles(roles map[string]Role) {
	for name := range roles {
		seen := []string{name}
		for r := roles[name]; r.From != ""; r = roles[r.From] {
			if slices.Contains(seen, r.From) {
				// One message per circle: from its first role by name.
				if r.From == name && slices.Min(seen) == name {
					c.at("spec.roles."+name+".from", "roles narrow each other in a circle: %s", strings.Join(append(seen, r.From), " → "))
				}
				break
			}
			seen = append(seen, r.From)
		}
	}
}

// roleRef checks that a role exists; addresses tells whether an apiServer
// role may stand there.
func (c *checker) roleRef(path, name string, roles map[string]Role, addresses bool) {
	if name == "" {
		c.at(path, "required: the name of a role in spec.roles")
		return
	}
	r, ok := roles[name]
	if !ok {
		known := make([]string, 0, len(roles))
		for k := range roles {
			known = append(known, k)
		}
		sort.Strings(known)
		c.at(path, "no role %q in spec.roles (roles: %s)", name, strings.Join(known, ", "))
		return
	}
	if r.APIServer && !addresses {
		c.at(path, "role %q is the API server's addresses; only a partition's peer can be", name)
	}
}

func (c *checker) fault(sp *ScenarioSpec) {
	f := sp.Fault
	p := "spec.fault"
	if !slices.Contains(Actions, f.Action) {
		c.at(p+".action", "%q: want one of %s", f.Action, strings.Join(Actions, ", "))
		return
	}
	if f.Action == ActionNone {
		if f.Target != "" {
			c.at(p+".target", "action none hits nothing: leave the target out")
		}
	} else {
		c.roleRef(p+".target", f.Target, sp.Roles, false)
	}
	only := func(field string, set bool, action string) {
		if set && f.Action != action {
			c.at(p+"."+field, "applies to %s only, not %s", action, f.Action)
		}
		if !set && f.Action == action {
			c.at(p+"."+field, "required for %s", action)
		}
	}
	only("peer", f.Peer != "", ActionPartition)
	if f.Peer != "" && f.Action == ActionPartition {
		c.roleRef(p+".peer", f.Peer, sp.Roles, true)
		if f.Peer == f.Target {
			c.at(p+".peer", "a partition's peer must differ from its target")
		}
	}
	only("container", f.Container != "", ActionContainerKill)
	only("rate", f.Rate != "", ActionBandwidth)
	if f.Rate != "" && !bandwidth.MatchString(f.Rate) {
		c.at(p+".rate", "%q: want a rate such as 1mbps (bps, kbps, mbps or gbps)", f.Rate)
	}
	switch f.Action {
	case ActionDelay, ActionAPILatency:
		if f.Latency.Duration <= 0 {
			c.at(p+".latency", "required for %s: a positive duration such as 100ms", f.Action)
		}
	case ActionWatchDelay:
	default:
		if f.Latency.Duration != 0 {
			c.at(p+".latency", "applies to %s, %s and %s only, not %s", ActionDelay, ActionAPILatency, ActionWatchDelay, f.Action)
		}
	}
	c.viewFault(sp)
	only("lossPercent", f.LossPercent != 0, ActionLoss)
	if f.LossPercent < 0 || f.LossPercent > 100 {
		c.at(p+".lossPercent", "%d: want a percentage from 1 to 100", f.LossPercent)
	}
	if f.Hold.Duration > maxHold {
		c.at(p+".hold", "%s is longer than %s: a longer fault is a soak", f.Hold.Duration, maxHold)
	}
}

func (c *checker) workload(w *Workload, roles map[string]Role) {
	p := "spec.workload"
	switch w.Kind {
	case WorkloadEtcdKV:
		if w.Endpoints == nil {
			c.at(p+".endpoints", "required for etcd-kv: the role and port the clients dial")
		} else {
			c.roleRef(p+".endpoints.role", w.Endpoints.Role, roles, false)
			c.port(p+".endpoints.port", w.Endpoints.Port)
		}
		if w.Command != nil {
			c.at(p+".command", "applies to kind command only")
		}
	case WorkloadCommand:
		if w.Command == nil {
			c.at(p+".command", "required for kind command")
		} else {
			c.roleRef(p+".command.role", w.Command.Role, roles, false)
			if len(w.Command.Command) == 0 {
				c.at(p+".command.command", "required: the command and its arguments")
			}
		}
		if w.Endpoints != nil || w.Clients != 0 || w.Keys != 0 || w.Baseline != nil {
			c.at(p, "endpoints, clients, keys and baseline apply to etcd-kv only")
		}
	default:
		c.at(p+".kind", "%q: want %s or %s", w.Kind, WorkloadEtcdKV, WorkloadCommand)
	}
	if w.Clients < 0 || w.Keys < 0 {
		c.at(p, "clients and keys cannot be negative")
	}
	if w.Baseline != nil && w.Baseline.Duration < time.Second {
		c.at(p+".baseline", "%s: at least 1s, to measure a fault-free rate", w.Baseline.Duration)
	}
}

func (c *checker) assertions(sp *ScenarioSpec) {
	a := sp.Assertions
	p := "spec.assertions"
	for i, ca := range a.Conditions {
		cp := fmt.Sprintf("%s.conditions[%d]", p, i)
		if (ca.Type == "") == (ca.CEL == "") {
			c.at(cp, "set exactly one of type (a status condition) or cel")
		}
		if ca.CEL != "" {
			c.cel(cp+".cel", ca.CEL)
		}
		if ca.Name != "" && ca.CEL == "" {
			c.at(cp+".name", "names a cel assertion; a type assertion is called by its type")
		}
		switch {
		case ca.Never != "" && (ca.Status != "" || ca.Within.Duration != 0 || ca.After != ""):
			c.at(cp, "never stands alone: it is judged from injection to heal, without status, within or after")
		case ca.Never != "":
			c.status(cp+".never", ca.Never, ca.CEL != "")
		default:
			c.status(cp+".status", ca.Status, ca.CEL != "")
			if ca.Within.Duration <= 0 {
				c.at(cp+".within", "required: how long after %q the condition may take", ca.After)
			}
			if _, _, ok := ConditionMoment(ca.After); !ok && !slices.Contains([]string{FromRequested, FromInjected, FromHealed, FromRecovered}, ca.After) {
				c.at(cp+".after", "%q: want requested, injected, healed, recovered, or <Type>=<Status> such as Available=False", ca.After)
			}
		}
	}
	for i, m := range a.Metrics {
		mp := fmt.Sprintf("%s.metrics[%d]", p, i)
		if !metricName.MatchString(m.Name) {
			c.at(mp+".name", "%q is not a Prometheus metric name", m.Name)
		}
		switch {
		case (m.MaxIncrease == nil) == (m.EqualsAfter == nil):
			c.at(mp, "set exactly one of maxIncrease or equalsAfter")
		case m.MaxIncrease != nil && *m.MaxIncrease < 0:
			c.at(mp+".maxIncrease", "%v: a rise cannot be negative", *m.MaxIncrease)
		}
	}
	if a.OperatorRestarts < 0 {
		c.at(p+".operatorRestarts", "%d cannot be negative", a.OperatorRestarts)
	}
	if a.SameAsFresh && IsViewAction(sp.Fault.Action) {
		c.at(p+".sameAsFresh", "a view fault's run is compared with its fault-free twin already: compare with a fresh resource under fault none or a Chaos Mesh fault")
	}
	for i, f := range a.Follows {
		fp := fmt.Sprintf("%s.follows[%d]", p, i)
		if !strings.HasPrefix(f.Field, "spec.") {
			c.at(fp+".field", "%q: name a spec field from the root, as spec.image", f.Field)
		}
		if kind, name, ok := strings.Cut(f.Object, "/"); !ok || kind == "" || name == "" {
			c.at(fp+".object", "%q: name the child as Kind/name, as StatefulSet/demo", f.Object)
		}
		if f.Path == "" {
			c.at(fp+".path", "name the child's field, as spec.template.spec.containers[0].image")
		}
	}
	if w := a.Workload; w != nil {
		if sp.Workload == nil {
			c.at(p+".workload", "the scenario runs no workload (spec.workload)")
		}
		if w.MinOperations < 0 {
			c.at(p+".workload.minOperations", "%d cannot be negative", w.MinOperations)
		}
		if s := w.MinFaultFreeShare; s != nil {
			switch {
			case *s <= 0 || *s > 1:
				c.at(p+".workload.minFaultFreeShare", "%v: want a share in (0, 1]", *s)
			case sp.Workload != nil && sp.Workload.Kind != WorkloadEtcdKV:
				c.at(p+".workload.minFaultFreeShare", "needs the etcd-kv workload, which measures a fault-free rate")
			}
		}
	}
}

// status checks a condition status; a CEL assertion's status is the
// expression's value (true or false).
func (c *checker) status(path, v string, isCEL bool) {
	want := []string{"True", "False", "Unknown"}
	if isCEL {
		want = []string{"true", "false"}
	}
	if !slices.Contains(want, v) {
		c.at(path, "%q: want %s", v, strings.Join(want, ", "))
	}
}
