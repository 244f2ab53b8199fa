package compare

import (
	"slices"
	"strings"

	"github.com/gauntlet-dev/gauntlet/chaos/explore/space"
)

// Unshown lists the spec fields (spec.a.b) a run changed that left no
// trace: the resource's children and status ended exactly as they were
// once the starting resource had converged, although each field listed
// names something a child holds (a field of that name, or under one: a
// Kubernetes type the operator passes on, such as a container's
// resources) or is a feature's switch turned on (space.Enables: a
// feature that, on, shows nowhere). The operator took the change and did nothing with it,
// without refusing it. It returns nil when the end state differs from
// the start anywhere (the change showed, whether or not as it should:
// other oracles judge how), and leaves out the changes that may rightly
// show nothing:
//   - a field newly set to its type's zero value (false, 0, "", empty),
//     which an unset field already means;
//   - a field under an object whose switch is off: one of switches (the
//     schema's booleans, a.b below spec) unset or false there, or any
//     boolean it holds set to false (a feature whose settings wait for
//     it);
//   - a field under a status (a template's, which the API ignores);
//   - a value some child already holds under the field's name (an
//     explicit default, such as a pull policy the operator already
//     writes).
func Unshown(start, end *State, switches []string) []string {
	if start == nil || end == nil {
		return nil
	}
	for _, d := range differences(start, end) {
		if !generationOnly(d.Path) {
			return nil
		}
	}
	held := heldByName(start.Children)
	was := Flatten(start.Spec)
	var out []string
	for path, v := range Flatten(end.Spec) {
		old, set := was[path]
		switch {
		case set && SameValue(old, v):
		case !set && isZero(v):
		case switchedOff(end.Spec, path, switches), slices.Contains(names(path), "status"):
		case v == true && space.Enables(lastName(path)):
			out = append(out, "spec."+path)
		case !heldName(held, path):
		case slices.ContainsFunc(held[lastName(path)], func(h any) bool { return SameValue(v, h) }):
		default:
			out = append(out, "spec."+path)
		}
	}
	slices.Sort(out)
	return out
}

// names are a flattened path's keys, list indexes dropped.
func names(path string) []string {
	return strings.Split(listIndex.ReplaceAllString(path, ""), ".")
}

func lastName(path string) string {
	n := names(path)
	return n[len(n)-1]
}

// heldByName is every key some child holds, anywhere in it, with the
// values of the leaves that end in it.
func heldByName(children map[string]map[string]any) map[string][]any {
	held := map[string][]any{}
	for _, c := range children {
		for path, v := range Flatten(c) {
			n := names(path)
			for _, k := range n[:len(n)-1] {
				if _, ok := held[k]; !ok {
					held[k] = nil
				}
			}
			held[n[len(n)-1]] = append(held[n[len(n)-1]], v)
		}
	}
	return held
}

// heldName says whether a child holds a key named as the spec field's
// last name or its parent's (a map's entry, whose own key is the user's:
// resources.requests.<key> is held where requests is).
func heldName(held map[string][]any, path string) bool {
	n := names(path)
	for _, k := range n[max(0, len(n)-2):] {
		if _, ok := held[k]; ok {
			return true
		}
	}
	return false
}

// switchedOff says whether an object above the field (below spec) has
// a switch off: one of switches left unset or set to false in it, or any
// boolean it holds set to false. The field's own switch turned on or off
// is judged as a field.
func switchedOff(spec map[string]any, path string, switches []string) bool {
	n := names(path)
	obj := spec
	for i, k := range n[:len(n)-1] {
		next, ok := obj[k].(map[string]any)
		if !ok && obj[k] != nil {
			return false // a list on the way: its items are not looked into
		}
		obj = next
		for _, v := range obj {
			if b, ok := v.(bool); ok && !b {
				return true
			}
		}
		prefix := strings.Join(n[:i+1], ".") + "."
		for _, sw := range switches {
			name, ok := strings.CutPrefix(sw, prefix)
			if ok && !strings.Contains(name, ".") && name != n[len(n)-1] && obj[name] != true {
				return true
			}
		}
	}
	return false
}

func isZero(v any) bool {
	switch t := v.(type) {
	case bool:
		return !t
	case string:
		return t == ""
	case nil:
		return true
	}
	f, ok := number(v)
	return ok && f == 0
}
