package endstate

import (
	"reflect"
	"testing"
)

func TestObjects(t *testing.T) {
	a := map[string]map[string]any{
		"StatefulSet/db": {"spec": map[string]any{"replicas": 5.0, "selector": map[string]any{"app": "db"}}},
		"Service/db":     {},
	}
	b := map[string]map[string]any{
		"StatefulSet/db":         {"spec": map[string]any{"replicas": 3.0, "selector": map[string]any{"app": "db"}, "paused": true}},
		"PodDisruptionBudget/db": {},
	}
	want := []Difference{
		{Path: "Service/db", A: "present", B: "missing"},
		{Path: "PodDisruptionBudget/db", A: "absent", B: "present (leaked)"},
		{Path: "StatefulSet/db.spec.paused", A: "absent", B: "true"},
		{Path: "StatefulSet/db.spec.replicas", A: "5", B: "3"},
	}
	if got := Objects(a, b); !reflect.DeepEqual(got, want) {
		t.Errorf("Objects:\n got %+v\nwant %+v", got, want)
	}
	if got := Objects(a, a); got != nil {
		t.Errorf("an end state against itself: %+v", got)
	}
}

func TestValues(t *testing.T) {
	member := func(name string, leader bool) map[string]any {
		m := map[string]any{"name": name, "id": name + "-id"}
		if leader {
			m["leader"] = true
		}
		return m
	}
	for _, tc := range []struct {
		name string
		a, b any
		want []Difference
	}{
		{"a leaf", map[string]any{"x": "1"}, map[string]any{"x": "2"}, []Difference{{Path: "status.x", A: `"1"`, B: `"2"`}}},
		{"another type", map[string]any{"x": "1"}, map[string]any{"x": map[string]any{"y": 1.0}}, []Difference{{Path: "status.x", A: `"1"`, B: `{"y":1}`}}},
		{"a field lost in a list item",
			map[string]any{"members": []any{member("db-0", false), member("db-1", true)}},
			map[string]any{"members": []any{member("db-0", false), member("db-1", false)}},
			[]Difference{{Path: "status.members[1].leader", A: "true", B: "absent"}}},
		{"an item added", map[string]any{"l": []any{"a"}}, map[string]any{"l": []any{"a", "b"}}, []Difference{{Path: "status.l[1]", A: "absent", B: `"b"`}}},
		{"written as it is", map[string]any{"x": "<ns>"}, map[string]any{}, []Difference{{Path: "status.x", A: `"<ns>"`, B: "absent"}}},
		{"equal", map[string]any{"x": []any{1.0}}, map[string]any{"x": []any{1.0}}, nil},
	} {
		if got := Values("status", tc.a, tc.b); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}
