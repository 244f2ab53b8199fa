package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/gauntlet-dev/gauntlet/operator/config/crd"
)

// rule is one admission rule the generated CRD states about the spec.
type rule struct {
	path string // spec.backup.destination.s3.bucket; [*] and {*} for items
	kind string // required, minimum, maximum, minLength, maxLength, enum, pattern, cel
	// bound is the limit of minimum, maximum, minLength and maxLength.
	bound int64
	// cel is the rule's expression.
	cel string
}

func (r rule) String() string {
	if r.kind == "cel" {
		return fmt.Sprintf("%s: CEL %s", r.path, r.cel)
	}
	return fmt.Sprintf("%s: %s %d", r.path, r.kind, r.bound)
}

// crdRules lists every rule of the v1beta1 spec schema of the CRD the
// operator ships: what a new marker adds shows up here by itself.
func crdRules(t *testing.T) []rule {
	t.Helper()
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(crd.DatabaseClusters, &def); err != nil {
		t.Fatalf("reading the CRD: %v", err)
	}
	for _, v := range def.Spec.Versions {
		if v.Name == "v1beta1" {
			root := v.Schema.OpenAPIV3Schema
			var out []rule
			// The object's own rules (on metadata.name), then the spec's.
			for _, x := range root.XValidations {
				out = append(out, rule{path: "metadata.name", kind: "cel", cel: x.Rule})
			}
			walkRules(root.Properties["spec"], "spec", &out)
			sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
			return out
		}
	}
	t.Fatal("the CRD serves no v1beta1")
	return nil
}

func walkRules(s apiextensionsv1.JSONSchemaProps, path string, out *[]rule) {
	if s.Minimum != nil {
		*out = append(*out, rule{path: path, kind: "minimum", bound: int64(*s.Minimum)})
	}
	if s.Maximum != nil {
		*out = append(*out, rule{path: path, kind: "maximum", bound: int64(*s.Maximum)})
	}
	if s.MinLength != nil {
		*out = append(*out, rule{path: path, kind: "minLength", bound: *s.MinLength})
	}
	if s.MaxLength != nil {
		*out = append(*out, rule{path: path, kind: "maxLength", bound: *s.MaxLength})
	}
	if len(s.Enum) > 0 {
		*out = append(*out, rule{path: path, kind: "enum"})
	}
	if s.Pattern != "" {
		*out = append(*out, rule{path: path, kind: "pattern"})
	}
	for _, v := range s.XValidations {
		*out = append(*out, rule{path: path, kind: "cel", cel: v.Rule})
	}
	for _, r := range s.Required {
		*out = append(*out, rule{path: path + "." + r, kind: "required"})
	}
	for name, p := range s.Properties {
		walkRules(p, path+"."+name, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkRules(*s.Items.Schema, path+"[*]", out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkRules(*s.AdditionalProperties.Schema, path+"{*}", out)
	}
}

// violation is one invalid object for a rule: set (or, with value nil and
// remove, delete) one field of a valid object, on create or, for a
// transition rule, on an update of a valid stored object.
type violation struct {
	path   string // where the value goes ([*] and {*} resolved)
	value  any
	remove bool
	update bool
	// base is the valid object to start from: "s3" or "volume" (where
	// restoreFrom and the backup destination point).
	base string
	// at is the path the refusal must name: the rule's (v.path when the
	// rule is the field's own).
	at string
	// want is what the refusal must contain besides the path: the value
	// given, or for rules on whole objects, what is wrong.
	want string
	// wantOneOf: the refusal contains one of these instead.
	wantOneOf []string
}

// generated derives the violation of a schema constraint from the rule.
func generated(r rule) (violation, bool) {
	v := violation{path: strings.NewReplacer("[*]", "[0]", "{*}", ".cpu").Replace(r.path), base: baseFor(r.path)}
	v.at = v.path
	switch r.kind {
	case "required":
		v.remove = true
	case "minimum":
		v.value, v.want = r.bound-1, fmt.Sprint(r.bound-1)
	case "maximum":
		v.value, v.want = r.bound+1, fmt.Sprint(r.bound+1)
	case "minLength":
		v.value = strings.Repeat("a", int(r.bound)-1)
		v.want = fmt.Sprintf("%q", v.value)
	case "maxLength":
		// The API server names the limit, not a value this long; a value
		// a decoder must parse first may be refused for its form.
		v.value = strings.Repeat("a", int(r.bound)+1)
		v.wantOneOf = []string{fmt.Sprint(r.bound), fmt.Sprintf("%q", v.value)}
	case "enum":
		v.value, v.want = "Bogus", `"Bogus"`
	case "pattern":
		v.value, v.want = "lots", `"lots"`
	default:
		return violation{}, false
	}
	return v, true
}

func baseFor(path string) string {
	if strings.Contains(path, ".volume") {
		return "volume"
	}
	return "s3"
}

// celCases are the violations of the CEL rules, keyed by the field's path
// with "s3." standing for both S3 locations (the backup destination and the
// restore source), then the first characters of the rule.
var celCases = map[string]violation{
	"metadata.name|self.metadata.name.size() <= ": {path: "metadata.name", value: strings.Repeat("d", 46), want: "metadata.name must be at most 45 characters"},
	"metadata.name|self.metadata.name.matches(":   {path: "metadata.name", value: "db.cluster", want: "metadata.name must start with a lowercase letter"},
	"spec|has(self.restoreFrom) == ":              {path: "spec.restoreFrom", value: nil, remove: true, update: true, want: "spec.restoreFrom"},
	"spec.backup.destination|has(self.volume)":    {path: "spec.backup.destination.volume", value: map[string]any{}, base: "s3", want: "both"},
	"spec.backup.retention|has(self.count) ||":    {path: "spec.backup.retention", value: map[string]any{}, want: "neither"},
	"spec.backup.retention.maxAge|self.matches(":  {path: "spec.backup.retention.maxAge", value: "1 day", want: `"1 day"`},
	"spec.backup.retention.maxAge|!self.matches":  {path: "spec.backup.retention.maxAge", value: "30s", want: `"30s"`},
	"spec.image|!self.matches('\\\\s')":           {path: "spec.image", value: "etcd v3", want: `"etcd v3"`},
	"spec.restoreFrom|self == oldSelf":            {path: "spec.restoreFrom.volume.file", value: "other.db", update: true, base: "volume", want: "spec.restoreFrom"},
	"spec.restoreFrom|has(self.volume) != has(":   {path: "spec.restoreFrom.volume", value: map[string]any{"claimName": "snaps", "file": "db.snap"}, base: "s3", want: "both"},
	"spec.restoreFrom.volume.claimName|self.mat":  {path: "spec.restoreFrom.volume.claimName", value: "Snaps_Claim", base: "volume", want: `"Snaps_Claim"`},
	"spec.restoreFrom.volume.file|self.matches(":  {path: "spec.restoreFrom.volume.file", value: "dir/db.snap", base: "volume", want: `"dir/db.snap"`},
	"spec.storage|has(self.storageClassName) ==":  {path: "spec.storage.storageClassName", remove: true, update: true, want: "spec.storage"},
	"spec.storage.size|!isQuantity(string(self":   {path: "spec.storage.size", value: "0", want: `"0"`},
	"spec.storage.size|self == oldSelf":           {path: "spec.storage.size", value: "2Gi", update: true, want: "2Gi"},
	"spec.storage.storageClassName|self.matche":   {path: "spec.storage.storageClassName", value: "Fast_SSD", want: `"Fast_SSD"`},
	"spec.storage.storageClassName|self == old":   {path: "spec.storage.storageClassName", value: "other", update: true, want: `"other"`},
	"s3.bucket|self.matches('^[a-z0-9][a-z0-9":    {path: "bucket", value: "Snaps_Bucket", want: `"Snaps_Bucket"`},
	"s3.bucket|!self.contains('..') && !self.c":   {path: "bucket", value: "snaps..db", want: `"snaps..db"`},
	"s3.bucket|!self.matches('^[0-9]+([.][0-9":    {path: "bucket", value: "192.168.5.4", want: `"192.168.5.4"`},
	"s3.bucket|!['xn--', 'sthree-', 'amzn-s3-":    {path: "bucket", value: "xn--snaps", want: `"xn--snaps"`},
	"s3.bucket|!['-s3alias', '--ol-s3', '.mra":    {path: "bucket", value: "snaps-s3alias", want: `"snaps-s3alias"`},
	"s3.credentialsSecret.name|self.matches('^":   {path: "credentialsSecret.name", value: "S3_Secret", want: `"S3_Secret"`},
	"s3.endpoint|isURL(self) && url(self).getS":   {path: "endpoint", value: "ftp://s3.example.com", want: `"ftp://s3.example.com"`},
	"s3.endpoint|!isURL(self) || url(self).get":   {path: "endpoint", value: "https://user:pw@s3.example.com", want: `https://user:pw@s3.example.com`},
	"s3.prefix|!self.startsWith('/')":             {path: "prefix", value: "/db", want: `"/db"`},
	"s3.prefix|!self.matches('(^|/)[.][.]?(/|":    {path: "prefix", value: "db/../x", want: `"db/../x"`},
	"s3.prefix|!self.contains('//')":              {path: "prefix", value: "db//x", want: `"db//x"`},
}

// celViolation finds the case of a CEL rule.
func celViolation(r rule) (violation, bool) {
	path := r.path
	prefix := ""
	for _, p := range []string{"spec.backup.destination.s3.", "spec.restoreFrom.s3."} {
		if rest, ok := strings.CutPrefix(path, p); ok {
			path, prefix = "s3."+rest, p
		}
	}
	for key, v := range celCases {
		keyPath, rulePrefix, _ := strings.Cut(key, "|")
		if keyPath != path || !strings.HasPrefix(r.cel, rulePrefix) {
			continue
		}
		v.path = prefix + v.path
		v.at = r.path
		if v.base == "" {
			v.base = baseFor(v.path)
		}
		return v, true
	}
	return violation{}, false
}

// goRules are the rules the CRD cannot state, written in Go
// (validation.Spec and the webhook's quorum rule): a case each, by hand.
var goRules = map[string]violation{
	"schedule is cron":               {path: "spec.backup.schedule", value: "every night", want: `"every night"`},
	"schedule fires":                 {path: "spec.backup.schedule", value: "0 0 31 2 *", want: `"0 0 31 2 *"`},
	"schedule at most once a minute": {path: "spec.backup.schedule", value: "@every 30s", want: `"@every 30s"`},
	"requests within limits": {path: "spec.resources", value: map[string]any{
		"requests": map[string]any{"cpu": "2"}, "limits": map[string]any{"cpu": "1"},
	}, at: "spec.resources.requests[cpu]", want: `"2"`},
	"resource names": {path: "spec.resources", value: map[string]any{"limits": map[string]any{"gpus": "1"}},
		at: "spec.resources.limits[gpus]", want: `"gpus"`},
	"quorum-safe scale-down": {path: "spec.replicas", value: int64(1), update: true, want: "from 3 to 1"},
}
