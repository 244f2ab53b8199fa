package apiproxy

import (
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseRequest(t *testing.T) {
	cases := []struct {
		method, target string
		want           Info
	}{
		{"GET", "/api/v1/namespaces/db/pods", Info{Verb: "list", Resource: "pods", Namespace: "db"}},
		{"GET", "/api/v1/namespaces/db/pods?watch=true&resourceVersion=5", Info{Verb: "watch", Resource: "pods", Namespace: "db"}},
		{"GET", "/api/v1/namespaces/db/pods/db-0", Info{Verb: "get", Resource: "pods", Namespace: "db", Name: "db-0"}},
		{"PUT", "/apis/database.gauntlet.dev/v1beta1/namespaces/db/databaseclusters/db/status",
			Info{Verb: "update", Resource: "databaseclusters/status", Namespace: "db", Name: "db"}},
		{"PATCH", "/apis/apps/v1/namespaces/db/statefulsets/db", Info{Verb: "patch", Resource: "statefulsets", Namespace: "db", Name: "db"}},
		{"POST", "/api/v1/namespaces/db/configmaps", Info{Verb: "create", Resource: "configmaps", Namespace: "db"}},
		{"DELETE", "/api/v1/namespaces/db/configmaps", Info{Verb: "deletecollection", Resource: "configmaps", Namespace: "db"}},
		{"DELETE", "/api/v1/namespaces/db", Info{Verb: "delete", Resource: "namespaces", Name: "db"}},
		{"GET", "/apis/storage.k8s.io/v1/storageclasses/standard", Info{Verb: "get", Resource: "storageclasses", Name: "standard"}},
		{"GET", "/version", Info{Verb: "get"}},
	}
	for _, tc := range cases {
		got := parseRequest(httptest.NewRequest(tc.method, tc.target, nil))
		got.Path = ""
		NewWithT(t).Expect(got).To(Equal(tc.want), "%s %s", tc.method, tc.target)
	}
}

func TestRuleMatchesAndCounts(t *testing.T) {
	g := NewWithT(t)
	p := &Proxy{rng: nil}
	p.Add(Rule{Verb: "create", Resource: "configmaps", Namespace: "db", Count: 2, Status: 409})
	create := Info{Verb: "create", Resource: "configmaps", Namespace: "db"}
	g.Expect(p.match(Info{Verb: "create", Resource: "configmaps", Namespace: "other"})).To(BeNil())
	g.Expect(p.match(create)).NotTo(BeNil())
	g.Expect(p.match(create)).NotTo(BeNil())
	g.Expect(p.match(create)).To(BeNil(), "spent after Count requests")
	p.Clear()
	g.Expect(p.match(create)).To(BeNil())
}
