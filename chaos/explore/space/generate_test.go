package space

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func raw(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

func spec() *apiextensionsv1.JSONSchemaProps {
	return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"replicas": {Type: "integer", Minimum: ptr.To(1.0), Maximum: ptr.To(9.0)},
		"policy":   {Type: "string", Enum: []apiextensionsv1.JSON{raw(`"Snapshot"`), raw(`"Delete"`)}, Default: ptr.To(raw(`"Snapshot"`))},
		"paused":   {Type: "boolean"},
		"storage": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"size":  {XIntOrString: true},
			"class": {Type: "string", MaxLength: ptr.To[int64](5)},
		}},
		"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}},
		"limits": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &apiextensionsv1.JSONSchemaProps{XIntOrString: true}}},
		"claims": {Type: "array", MaxItems: ptr.To[int64](4), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Required: []string{"name"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": {Type: "string"}, "request": {Type: "string"}}}}},
		"args": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
	}}
}

func TestFields(t *testing.T) {
	g := NewWithT(t)
	fields, skipped := Fields(spec())
	var names []string
	for _, f := range fields {
		names = append(names, f.String())
	}
	g.Expect(names).To(Equal([]string{"spec.args", "spec.claims", "spec.limits", "spec.paused", "spec.policy", "spec.replicas", "spec.storage.class", "spec.storage.size"}))
	g.Expect(skipped).To(ConsistOf("spec.labels (an object whose keys have no schema)"))
}

func TestCandidates(t *testing.T) {
	g := NewWithT(t)
	fields, _ := Fields(spec())
	byName := map[string]Field{}
	for _, f := range fields {
		byName[f.String()] = f
	}
	g.Expect(Candidates(byName["spec.replicas"], int64(3))).To(Equal([]any{int64(1), int64(2), int64(5), int64(8), int64(9)}),
		"the bounds, their neighbours inside and the middle; not the current 3")
	g.Expect(Candidates(byName["spec.policy"], "Snapshot")).To(Equal([]any{"Delete"}), "every enum member but the current")
	g.Expect(Candidates(byName["spec.paused"], nil)).To(Equal([]any{true}))
	g.Expect(Candidates(byName["spec.storage.class"], "fast")).To(Equal([]any{"explore", "", "aaaaa"}), "a string at its length bound")
	g.Expect(Candidates(byName["spec.storage.size"], "10Gi")).To(Equal([]any{"20Gi", "5Gi", "0", 1}), "a quantity grown, shrunk, emptied and as an integer")
	g.Expect(Candidates(byName["spec.storage.size"], "500m")).To(Equal([]any{"1", "250m", "0"}), "the integer 1 is the grown string 1")
	g.Expect(Candidates(byName["spec.storage.size"], nil)).To(Equal([]any{"1Gi", "2Gi", "0", 1, "100%"}), "unset: sizes, a number, a percentage")
	g.Expect(Candidates(byName["spec.storage.size"], "25%")).To(Equal([]any{"1Gi", "2Gi", "0", 1, "100%"}))
}

// A map gets the keys its name suggests, alone and together, and is
// cleared (its keys set to null) where it has some; a list is emptied,
// or gets one item built whole, or two that differ.
func TestMapAndListCandidates(t *testing.T) {
	g := NewWithT(t)
	fields, _ := Fields(spec())
	byName := map[string]Field{}
	for _, f := range fields {
		byName[f.String()] = f
	}
	g.Expect(Candidates(byName["spec.limits"], map[string]any{"cpu": "1"})).To(Equal([]any{
		map[string]any{"cpu": nil},
		map[string]any{"cpu": "100m"}, map[string]any{"memory": "64Mi"}, map[string]any{"cpu": "100m", "memory": "64Mi"},
	}))
	g.Expect(Candidates(byName["spec.claims"], nil)).To(Equal([]any{
		[]any{map[string]any{"name": "explore"}},
		[]any{map[string]any{"name": "explore"}, map[string]any{"name": "explore-2"}},
	}))
	g.Expect(Candidates(byName["spec.args"], []any{"a"})).To(Equal([]any{[]any{}, []any{"explore"}, []any{"explore", "explore-2"}}))
	s := Step{Path: []string{"spec", "limits"}, Value: map[string]any{"cpu": "100m"}}
	g.Expect(s.String()).To(Equal(`spec.limits={"cpu":"100m"}`))
}

func TestStepPatch(t *testing.T) {
	g := NewWithT(t)
	s := Step{Path: []string{"spec", "storage", "size"}, Value: "2Gi"}
	g.Expect(s.Patch()).To(Equal(map[string]any{"spec": map[string]any{"storage": map[string]any{"size": "2Gi"}}}))
	g.Expect(s.String()).To(Equal("spec.storage.size=2Gi"))
}

// The seed fixes the plan; each step runs alone once, and sequences,
// spread among them, touch each field at most once, or undo the step they
// take.
func TestPlan(t *testing.T) {
	g := NewWithT(t)
	steps := []Step{
		{Path: []string{"spec", "a"}, Value: 1}, {Path: []string{"spec", "a"}, Value: 2},
		{Path: []string{"spec", "b"}, Value: true}, {Path: []string{"spec", "c"}, Value: "x"},
		{Path: []string{"spec", "d"}, Value: 3, AtCreation: true},
	}
	base := map[string]any{"spec": map[string]any{"a": 5}}
	p := Plan(steps, 7, 12, 3, base)
	g.Expect(Plan(steps, 7, 12, 3, base)).To(Equal(p), "replayable")
	g.Expect(p).To(HaveLen(len(steps) + 12))
	undos, singles := 0, map[string]int{}
	for _, seq := range p {
		if len(seq) == 1 {
			singles[seq[0].String()]++
			continue
		}
		if seq[1].Undo {
			undos++
			g.Expect(seq).To(HaveLen(2))
			g.Expect(seq[0].AtCreation).To(BeFalse(), "a value set at creation has nothing to go back to")
			g.Expect(seq[1].Path).To(Equal(seq[0].Path))
			if seq[0].Path[1] == "a" {
				g.Expect(seq[1].Value).To(Equal(5), "the base's value")
			} else {
				g.Expect(seq[1].Value).To(BeNil(), "removed: the base has none")
			}
			continue
		}
		fields := map[string]bool{}
		for _, s := range seq {
			g.Expect(fields[s.Field()]).To(BeFalse(), "a field once per sequence")
			fields[s.Field()] = true
		}
	}
	g.Expect(undos).To(BeNumerically(">", 0), "some sequences undo their step")
	g.Expect(singles).To(HaveLen(len(steps)))
	for step, n := range singles {
		g.Expect(n).To(Equal(1), "%s alone once", step)
	}
	// 5 singles, 12 sequences: a sequence after every single, the rest
	// at the end.
	for i := 1; i < 2*len(steps); i += 2 {
		g.Expect(len(p[i])).To(BeNumerically(">=", 2), "run %d is a sequence", i)
	}
}

// Sequences are spread evenly among the singles, so that a short budget
// reaches some.
func TestInterleave(t *testing.T) {
	g := NewWithT(t)
	one := func(n int) []Step { return make([]Step, n) }
	singles := [][]Step{one(1), one(1), one(1), one(1), one(1), one(1), one(1)}
	lens := func(p [][]Step) []int {
		var out []int
		for _, s := range p {
			out = append(out, len(s))
		}
		return out
	}
	g.Expect(lens(interleave(singles, [][]Step{one(2), one(3)}))).To(Equal([]int{1, 1, 1, 1, 2, 1, 1, 1, 3}))
	g.Expect(lens(interleave(singles[:2], [][]Step{one(2), one(2), one(2)}))).To(Equal([]int{1, 2, 1, 2, 2}))
	g.Expect(lens(interleave(singles[:2], nil))).To(Equal([]int{1, 1}))
}

func TestUndoOf(t *testing.T) {
	g := NewWithT(t)
	base := map[string]any{"spec": map[string]any{"replicas": int64(3)}}
	u, ok := UndoOf(Step{Path: []string{"spec", "replicas"}, Value: int64(5)}, base)
	g.Expect(ok).To(BeTrue())
	g.Expect(u.Patch()).To(Equal(map[string]any{"spec": map[string]any{"replicas": int64(3)}}))
	g.Expect(u.String()).To(Equal("spec.replicas back as it was"))
	// A parent the base lacks is removed: a JSON merge patch's null.
	u, _ = UndoOf(Step{Path: []string{"spec", "backup"}, Leaf: []string{"spec", "backup", "schedule"}}, base)
	g.Expect(u.Patch()).To(Equal(map[string]any{"spec": map[string]any{"backup": nil}}))
	_, ok = UndoOf(Step{Path: []string{"spec", "storage"}, AtCreation: true}, base)
	g.Expect(ok).To(BeFalse())
	// Keys the step added to a map the base holds are removed with it;
	// the base's own come back.
	base = map[string]any{"spec": map[string]any{"labels": map[string]any{"team": "a", "tier": map[string]any{"x": "1"}}}}
	u, _ = UndoOf(Step{Path: []string{"spec", "labels"}, Value: map[string]any{"team": "b", "new": "c", "tier": map[string]any{"y": "2"}}}, base)
	g.Expect(u.Value).To(Equal(map[string]any{"team": "a", "new": nil, "tier": map[string]any{"x": "1", "y": nil}}))
}

func TestShrink(t *testing.T) {
	g := NewWithT(t)
	seq := []Step{{Path: []string{"spec", "a"}, Value: 1}, {Path: []string{"spec", "b"}, Value: 2}, {Path: []string{"spec", "c"}, Value: 3}}
	tries := 0
	// Fails whenever b and c are both in, in that order.
	fails := func(s []Step) bool {
		tries++
		i := slices.IndexFunc(s, func(x Step) bool { return x.Field() == "spec.b" })
		j := slices.IndexFunc(s, func(x Step) bool { return x.Field() == "spec.c" })
		return i >= 0 && j > i
	}
	g.Expect(Shrink(seq, fails)).To(Equal(seq[1:]))
	g.Expect(tries).To(Equal(3))
}

func backupSchema() *apiextensionsv1.JSONSchemaProps {
	return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"replicas": {Type: "integer", Minimum: ptr.To(1.0)},
		"backup": {Type: "object", Required: []string{"destination", "schedule", "retention"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"schedule": {Type: "string"},
			"destination": {Type: "object", XValidations: apiextensionsv1.ValidationRules{{Rule: "has(self.s3) != has(self.volume)"}},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"s3": {Type: "object", Required: []string{"bucket", "endpoint"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"bucket": {Type: "string"}, "endpoint": {Type: "string"}, "region": {Type: "string", Default: ptr.To(raw(`"us-east-1"`))},
					}},
					"volume": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"claimName": {Type: "string"}}},
				}},
			"retention": {Type: "object", XValidations: apiextensionsv1.ValidationRules{{Rule: "has(self.count) || has(self.maxAge)"}},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"count": {Type: "integer", Minimum: ptr.To(1.0)}, "maxAge": {Type: "string"}}},
		}},
	}}
}

// A field whose parents the resource lacks is set inside the smallest
// object the schema admits: required properties, one property of an
// object whose rules ask for one, values the names suggest.
func TestUnder(t *testing.T) {
	g := NewWithT(t)
	s := Under(backupSchema(), Step{Path: []string{"spec", "backup", "retention", "maxAge"}, Value: "2h"}, 2)
	g.Expect(s.Path).To(Equal([]string{"spec", "backup"}))
	g.Expect(s.Value).To(Equal(map[string]any{
		"schedule":    "0 * * * *",
		"destination": map[string]any{"s3": map[string]any{"bucket": "explore", "endpoint": "https://explore.example.com"}},
		"retention":   map[string]any{"maxAge": "2h"},
	}), "retention requires nothing; its rule wants one of count or maxAge, which the step sets")
	g.Expect(s.Field()).To(Equal("spec.backup.retention.maxAge"))
	g.Expect(s.String()).To(Equal("spec.backup.retention.maxAge=2h (in a new spec.backup)"))
	g.Expect(s.Patch()).To(HaveKeyWithValue("spec", HaveKey("backup")))

	// "exactly one of s3 or volume": the step's own property, not the
	// first one besides it.
	s = Under(backupSchema(), Step{Path: []string{"spec", "backup", "destination", "volume", "claimName"}, Value: "snaps"}, 3)
	g.Expect(s.Value).To(HaveKeyWithValue("destination", map[string]any{"volume": map[string]any{"claimName": "snaps"}}))

	plain := Step{Path: []string{"spec", "replicas"}, Value: int64(3)}
	g.Expect(Under(backupSchema(), plain, 0)).To(Equal(plain), "nothing missing, nothing built")
}

func TestHintedString(t *testing.T) {
	g := NewWithT(t)
	g.Expect(hintedString("endpoint")).To(Equal("https://explore.example.com"))
	g.Expect(hintedString("schedule")).To(Equal("0 * * * *"))
	g.Expect(hintedString("maxage")).To(Equal("1h"))
	g.Expect(hintedString("storageclassname")).To(Equal("explore"), "storage is no age")
}

// The singles change every field once before any field a second time.
func TestPlanGoesRoundTheFields(t *testing.T) {
	g := NewWithT(t)
	var steps []Step
	for v := range 5 {
		steps = append(steps, Step{Path: []string{"spec", "enum"}, Value: v})
	}
	steps = append(steps, Step{Path: []string{"spec", "b"}, Value: true}, Step{Path: []string{"spec", "c"}, Value: "x"},
		Step{Path: []string{"spec", "c"}, Value: "y"}, Step{Path: []string{"spec", "d"}, Unset: true})
	for seed := range uint64(20) {
		p := Plan(steps, seed, 0, 1, nil)
		g.Expect(p).To(HaveLen(len(steps)))
		var first []string
		for _, seq := range p[:4] {
			first = append(first, seq[0].Field())
		}
		g.Expect(first).To(ConsistOf("spec.enum", "spec.b", "spec.c", "spec.d"), "seed %d: every field in the first round", seed)
		g.Expect(p[len(p)-1][0].Field()).To(Equal("spec.enum"), "seed %d: the field of most values ends the plan", seed)
	}
}

// What the starting resource sets and the schema does not require can be
// unset, at any depth; a merge patch's null removes it.
func TestRemovals(t *testing.T) {
	g := NewWithT(t)
	s := spec()
	s.Required = []string{"replicas"}
	obj := map[string]any{"spec": map[string]any{
		"replicas": 3, "policy": "Delete",
		"storage": map[string]any{"size": "1Gi"},
		"claims":  []any{map[string]any{"name": "a"}},
		"unknown": 1, // not in the schema: the API server prunes it
	}}
	var got []string
	for _, st := range Removals(s, obj) {
		got = append(got, st.String())
		g.Expect(st.Unset).To(BeTrue())
	}
	g.Expect(got).To(Equal([]string{"spec.claims unset", "spec.policy unset", "spec.storage unset", "spec.storage.size unset"}))
	st := Removals(s, obj)[3]
	g.Expect(st.Patch()).To(Equal(map[string]any{"spec": map[string]any{"storage": map[string]any{"size": nil}}}))
	undo, ok := UndoOf(st, obj)
	g.Expect(ok).To(BeTrue())
	g.Expect(undo.Value).To(Equal("1Gi"), "undoing a removal sets the value back")
	g.Expect(Removals(s, map[string]any{})).To(BeEmpty())
}

// Every section of the spec gets its turn at every level, so a section
// of many fields does not crowd out the fields beside it.
func TestFairOrder(t *testing.T) {
	g := NewWithT(t)
	var fields [][]string
	for _, f := range []string{"spec.override.sts.a", "spec.override.sts.b", "spec.override.svc.c", "spec.override.sts.d",
		"spec.replicas", "spec.override.sts.e", "spec.service.annotations", "spec.service.type", "spec.probes", "spec.probes.liveness.period"} {
		fields = append(fields, strings.Split(f, "."))
	}
	var got []string
	for _, f := range fairOrder(fields) {
		got = append(got, strings.Join(f, "."))
	}
	g.Expect(got).To(Equal([]string{
		"spec.override.sts.a", "spec.replicas", "spec.service.annotations", "spec.probes", // one from each section
		"spec.override.svc.c", "spec.service.type", "spec.probes.liveness.period",
		"spec.override.sts.b", "spec.override.sts.d", "spec.override.sts.e",
	}))
}

// A step that sets a map's keys is followed by one that replaces them.
func TestReplacing(t *testing.T) {
	g := NewWithT(t)
	ann := Step{Path: []string{"spec", "service", "annotations"}, Value: map[string]any{"gauntlet.dev/explore": "explore"}}
	r, ok := Replacing(ann)
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Patch()).To(Equal(map[string]any{"spec": map[string]any{"service": map[string]any{"annotations": map[string]any{
		"gauntlet.dev/explore": nil, "gauntlet.dev/explore-2": "explore"}}}}))
	r, ok = Replacing(Step{Path: []string{"spec", "limits"}, Value: map[string]any{"cpu": "100m"}})
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Value).To(Equal(map[string]any{"cpu": nil, "memory": "64Mi"}), "a known key trades for another")
	inNew := Step{Path: []string{"spec", "override"}, Value: map[string]any{"labels": map[string]any{"k": "v"}},
		Leaf: []string{"spec", "override", "labels"}, LeafValue: map[string]any{"k": "v"}}
	r, ok = Replacing(inNew)
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Path).To(Equal(inNew.Leaf), "the new parent is there by then")
	g.Expect(r.Value).To(Equal(map[string]any{"k": nil, "k-2": "v"}))
	for _, s := range []Step{
		{Path: []string{"spec", "limits"}, Value: map[string]any{"cpu": "100m", "memory": "64Mi"}},
		{Path: []string{"spec", "labels"}, Value: map[string]any{"k": nil}},
		{Path: []string{"spec", "labels"}, Value: map[string]any{"k": "v"}, AtCreation: true},
		{Path: []string{"spec", "replicas"}, Value: 3},
	} {
		_, ok := Replacing(s)
		g.Expect(ok).To(BeFalse(), "%s has no replacement", s)
	}
	p := Plan([]Step{ann, {Path: []string{"spec", "replicas"}, Value: 3}}, 1, 0, 1, nil)
	g.Expect(p).To(ContainElement(Equal([]Step{ann, r0(ann)})), "the map's step runs with its replacement")
	g.Expect(p).To(ContainElement(HaveLen(1)))
}

func r0(s Step) Step { r, _ := Replacing(s); return r }

// A boolean with no default true is a switch, at any depth, list items'
// under the list's name; one on by default is not.
func TestSwitches(t *testing.T) {
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	boolean := apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	on := apiextensionsv1.JSONSchemaProps{Type: "boolean", Default: &apiextensionsv1.JSON{Raw: []byte("true")}}
	privileged := obj(map[string]apiextensionsv1.JSONSchemaProps{"privileged": boolean})
	spec := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"paused":   boolean,
		"exporter": obj(map[string]apiextensionsv1.JSONSchemaProps{"enabled": boolean, "image": {Type: "string"}}),
		"tls":      obj(map[string]apiextensionsv1.JSONSchemaProps{"verify": on}),
		"sidecars": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &privileged}},
	})
	NewWithT(t).Expect(Switches(&spec)).To(Equal([]string{"exporter.enabled", "paused", "sidecars.privileged"}))
}

func TestHasField(t *testing.T) {
	g := NewWithT(t)
	spec := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"backup": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"schedule": {Type: "string"}}}}}
	g.Expect(HasField(spec, []string{"backup", "schedule"})).To(BeTrue())
	g.Expect(HasField(spec, []string{"backup", "retention"})).To(BeFalse())
	g.Expect(HasField(spec, []string{"replicas"})).To(BeFalse())
}

// A setting under a switch that is off is tried with the switch on: in
// the resource's own object (the step moves up to it) or in the object
// the step builds; the switch itself, a switch already on, a boolean not
// named as one, and a removal are left alone.
func TestSwitchOn(t *testing.T) {
	g := NewWithT(t)
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	boolean := apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	integer := apiextensionsv1.JSONSchemaProps{Type: "integer"}
	pdb := obj(map[string]apiextensionsv1.JSONSchemaProps{"enabled": boolean, "minAvailable": integer})
	schema := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"follower": obj(map[string]apiextensionsv1.JSONSchemaProps{"pdb": pdb, "size": integer}),
		"tls":      obj(map[string]apiextensionsv1.JSONSchemaProps{"disableNonTLS": boolean, "secret": {Type: "string"}}),
	})
	base := map[string]any{"spec": map[string]any{"follower": map[string]any{"pdb": map[string]any{"minAvailable": int64(1)}}}}

	s := SwitchOn(&schema, Step{Path: []string{"spec", "follower", "pdb", "minAvailable"}, Value: int64(2)}, base)
	g.Expect(s.Path).To(Equal([]string{"spec", "follower", "pdb"}))
	g.Expect(s.Value).To(Equal(map[string]any{"enabled": true, "minAvailable": int64(2)}))
	g.Expect(s.Field()).To(Equal("spec.follower.pdb.minAvailable"))
	g.Expect(s.String()).To(Equal("spec.follower.pdb.minAvailable=2 with spec.follower.pdb.enabled on"))
	u, _ := UndoOf(s, base)
	g.Expect(u.Value).To(Equal(map[string]any{"enabled": nil, "minAvailable": int64(1)}), "the undo turns the switch off again")

	built := Step{Path: []string{"spec", "follower"}, Value: map[string]any{"pdb": map[string]any{"minAvailable": int64(2)}},
		Leaf: []string{"spec", "follower", "pdb", "minAvailable"}, LeafValue: int64(2)}
	s = SwitchOn(&schema, built, map[string]any{"spec": map[string]any{}})
	g.Expect(s.Value).To(Equal(map[string]any{"pdb": map[string]any{"enabled": true, "minAvailable": int64(2)}}))
	g.Expect(s.String()).To(Equal("spec.follower.pdb.minAvailable=2 (in a new spec.follower) with spec.follower.pdb.enabled on"))
	g.Expect(built.Value).To(Equal(map[string]any{"pdb": map[string]any{"minAvailable": int64(2)}}), "the step it was given is kept")

	for _, st := range []Step{
		{Path: []string{"spec", "follower", "pdb", "enabled"}, Value: true},
		{Path: []string{"spec", "follower", "size"}, Value: int64(3)},
		{Path: []string{"spec", "tls", "secret"}, Value: "s"},
		{Path: []string{"spec", "follower", "pdb", "minAvailable"}, Unset: true},
	} {
		g.Expect(SwitchOn(&schema, st, base)).To(Equal(st), st.String())
	}
	on := map[string]any{"spec": map[string]any{"follower": map[string]any{"pdb": map[string]any{"enabled": true}}}}
	plain := Step{Path: []string{"spec", "follower", "pdb", "minAvailable"}, Value: int64(2)}
	g.Expect(SwitchOn(&schema, plain, on)).To(Equal(plain), "a switch already on")
}

// A quantity the resource holds is tried grown first in the plan's single
// values, whatever the seed; the sweep (InRounds) keeps the seed's order.
func TestPrimaryFirst(t *testing.T) {
	g := NewWithT(t)
	fields, _ := Fields(spec())
	var size Field
	for _, f := range fields {
		if f.String() == "spec.storage.size" {
			size = f
		}
	}
	base := map[string]any{"spec": map[string]any{"storage": map[string]any{"size": "10Gi"}}}
	steps := Steps(spec(), size, "10Gi", 0, base)
	g.Expect(steps).To(HaveLen(4))
	g.Expect(steps[0].Value).To(Equal("20Gi"))
	g.Expect(steps[0].Primary).To(BeTrue())
	for _, st := range steps[1:] {
		g.Expect(st.Primary).To(BeFalse(), "%s", st)
	}
	g.Expect(Steps(spec(), size, nil, 0, base)[0].Primary).To(BeFalse(), "no quantity held, no primary value")
	for seed := range uint64(20) {
		plan := Plan(steps, seed, 0, 0, base)
		g.Expect(plan[0][0].Value).To(Equal("20Gi"), "seed %d", seed)
	}
}
