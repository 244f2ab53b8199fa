package explore

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/chaos/report"
	"github.com/gauntlet-dev/gauntlet/chaos/scenario"
)

// writeFinding writes the shrunk sequence as a scenario file beside a
// copy of the base resource's manifest, under dir/findings, laid out as
// a person writes one.
func (c *campaign) writeFinding(dir string, s *scenario.Scenario, oracle, what string) (string, error) {
	name := s.Metadata.Name
	out := filepath.Join(dir, "findings")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	manifest, err := os.ReadFile(scenario.Beside(filepath.Dir(c.e.Set().Files[name]), s.Spec.Resource.Manifest))
	if err != nil {
		return "", err
	}
	s.Spec.Resource.Manifest = name + "-resource.yaml"
	if err := os.WriteFile(filepath.Join(out, s.Spec.Resource.Manifest), manifest, 0o644); err != nil {
		return "", err
	}
	file := filepath.Join(out, name+".yaml")
	b, err := findingYAML(s, oracle, what, c.replayCommand(file))
	if err != nil {
		return "", err
	}
	return file, os.WriteFile(file, b, 0o644)
}

// replayCommand is the command that replays a finding's file where the
// campaign ran: envtest, or a cluster (kind, or --kubeconfig's).
func (c *campaign) replayCommand(file string) string {
	where := ""
	if c.e.OnEnvtest() {
		where = "--envtest "
	}
	return fmt.Sprintf("gauntlet run %s-f %s -f %s%s", where, c.e.Set().OperatorFile, file, report.SetFlags(setVariables(c.e.Overrides())))
}

// setVariables are the --set variables, NAME=VALUE, by name.
func setVariables(overrides map[string]string) []string {
	out := make([]string, 0, len(overrides))
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		out = append(out, k+"="+overrides[k])
	}
	return out
}

// findingYAML lays a finding's scenario out in the order of the docs:
// what it starts from, what it does, how it is judged.
func findingYAML(s *scenario.Scenario, oracle, what, replay string) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Found by gauntlet explore: it broke the oracle %q:\n", oracle)
	for _, line := range strings.Split(what, "\n") {
		fmt.Fprintf(&b, "#   %s\n", line)
	}
	fmt.Fprintf(&b, "# Replay: %s\n", replay)
	fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  description: %q\nspec:\n",
		scenario.APIVersion, scenario.KindScenario, s.Metadata.Name, s.Metadata.Description)
	block := func(key string, v any) error {
		y, err := sigsyaml.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  %s:\n", key)
		for _, line := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
			fmt.Fprintf(&b, "    %s\n", line)
		}
		return nil
	}
	r := s.Spec.Resource
	resource := map[string]any{"manifest": r.Manifest, "converged": r.Converged}
	if r.AllPodsReady != nil {
		resource["allPodsReady"] = *r.AllPodsReady
	}
	if r.ConvergeWithin.Duration > 0 {
		resource["convergeWithin"] = r.ConvergeWithin.Duration.String()
	}
	if r.DeleteWithin.Duration > 0 {
		resource["deleteWithin"] = r.DeleteWithin.Duration.String()
	}
	var during []map[string]any
	for _, a := range s.Spec.During {
		if a.Converge {
			during = append(during, map[string]any{"converge": true})
		} else {
			during = append(during, map[string]any{"patch": a.Patch})
		}
	}
	a := s.Spec.Assertions
	assertions := map[string]any{"truthfulStatus": a.TruthfulStatus, "stableFor": a.StableFor.Duration.String()}
	if a.OperatorRestarts > 0 {
		assertions["operatorRestarts"] = a.OperatorRestarts
	}
	if a.SameAsFresh {
		assertions["sameAsFresh"] = true
	}
	if a.ChangesShow {
		assertions["changesShow"] = true
	}
	if f := s.Spec.Assertions.Follows; len(f) > 0 {
		assertions["follows"] = f
	}
	for _, part := range []struct {
		key string
		v   any
	}{
		{"variables", s.Spec.Variables}, {"resource", resource}, {"roles", s.Spec.Roles}, {"before", s.Spec.Before},
		{"fault", faultMap(s.Spec.Fault)}, {"workload", s.Spec.Workload}, {"during", during}, {"assertions", assertions},
	} {
		if part.key == "variables" && len(s.Spec.Variables) == 0 || part.key == "roles" && len(s.Spec.Roles) == 0 ||
			part.key == "workload" && s.Spec.Workload == nil || part.key == "before" && len(s.Spec.Before) == 0 ||
			part.key == "during" && len(during) == 0 {
			continue
		}
		if err := block(part.key, part.v); err != nil {
			return nil, err
		}
	}
	return []byte(b.String()), nil
}

// faultMap is a fault as a person writes it: the fields set, durations
// as text.
func faultMap(f scenario.Fault) map[string]any {
	b, _ := json.Marshal(f)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k, v := range m {
		if v == "0s" {
			delete(m, k)
		}
	}
	return m
}
