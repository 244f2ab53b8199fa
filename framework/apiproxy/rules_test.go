package apiproxy

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParseRequest(t *testing.T) {
	cases := []struct {
		method, target string
		want           Info
	}{
		{"GET", "/api/v1/namespaces/db/pods", Info{Verb: "list", Resource: "pods", Namespace: "db"}},
		{"GET", "/api/v1/namespaces/db/pods?watch=true&resourceVersion=5", Info{Verb: "watch", Resource: "pods", Namespace: "db"}},
		{"GET", "/api/v1/namespaces/db/pods?watch=1&fieldSelector=metadata.name%3Ddb-0",
			Info{Verb: "watch", Resource: "pods", Namespace: "db", Name: "db-0"}},
		{"GET", "/api/v1/namespaces/db/pods/db-0", Info{Verb: "get", Resource: "pods", Namespace: "db", Name: "db-0"}},
		{"GET", "/api/v1/namespaces/db/pods/db-0/log", Info{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "db", Name: "db-0"}},
		{"PUT", "/apis/database.gauntlet.dev/v1beta1/namespaces/db/databaseclusters/db/status",
			Info{Verb: "update", Resource: "databaseclusters", Subresource: "status", Namespace: "db", Name: "db"}},
		{"PATCH", "/apis/apps/v1/namespaces/db/statefulsets/db", Info{Verb: "patch", Resource: "statefulsets", Namespace: "db", Name: "db"}},
		{"POST", "/api/v1/namespaces/db/configmaps", Info{Verb: "create", Resource: "configmaps", Namespace: "db"}},
		{"DELETE", "/api/v1/namespaces/db/configmaps", Info{Verb: "deletecollection", Resource: "configmaps", Namespace: "db"}},
		{"DELETE", "/api/v1/namespaces/db", Info{Verb: "delete", Resource: "namespaces", Name: "db"}},
		{"PUT", "/api/v1/namespaces/db/finalize", Info{Verb: "update", Resource: "namespaces", Subresource: "finalize", Name: "db"}},
		{"GET", "/api/v1/namespaces/db/status", Info{Verb: "get", Resource: "namespaces", Subresource: "status", Name: "db"}},
		{"GET", "/apis/storage.k8s.io/v1/storageclasses/standard", Info{Verb: "get", Resource: "storageclasses", Name: "standard"}},
		{"GET", "/version", Info{Verb: "get"}},
	}
	for _, tc := range cases {
		got := parseRequest(httptest.NewRequest(tc.method, tc.target, nil))
		got.Path = ""
		NewWithT(t).Expect(got).To(Equal(tc.want), "%s %s", tc.method, tc.target)
	}
	status := Info{Verb: "update", Resource: "databaseclusters", Subresource: "status", Namespace: "db", Name: "x"}
	NewWithT(t).Expect(status.String()).To(Equal("update databaseclusters/status db/x"))
}

func TestRuleMatchesSubresource(t *testing.T) {
	g := NewWithT(t)
	pod := Info{Verb: "get", Resource: "pods", Namespace: "db", Name: "db-0"}
	log := Info{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "db", Name: "db-0"}
	none, any, only := Rule{Resource: "pods"}, Rule{Resource: "pods", Subresource: "*"}, Rule{Resource: "pods", Subresource: "log"}
	g.Expect(none.matches(pod, labelView{})).To(BeTrue())
	g.Expect(none.matches(log, labelView{})).To(BeFalse(), "empty Subresource: only requests without one")
	g.Expect(any.matches(pod, labelView{})).To(BeTrue())
	g.Expect(any.matches(log, labelView{})).To(BeTrue())
	g.Expect(only.matches(pod, labelView{})).To(BeFalse())
	g.Expect(only.matches(log, labelView{})).To(BeTrue())
}

func TestRuleMatchesLabels(t *testing.T) {
	g := NewWithT(t)
	p := newProxy(1)
	r := Rule{Resource: "configmaps", Labels: map[string]string{"app": "db"}}
	req := func(method, target, body string) (Info, labelView) {
		hr := httptest.NewRequest(method, target, strings.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		info := parseRequest(hr)
		return info, p.viewLabels(hr, info)
	}
	g.Expect(r.matches(req("POST", "/api/v1/namespaces/db/configmaps", `{"metadata":{"name":"a","labels":{"app":"db","x":"y"}}}`))).To(BeTrue())
	g.Expect(r.matches(req("POST", "/api/v1/namespaces/db/configmaps", `{"metadata":{"name":"a","labels":{"app":"web"}}}`))).To(BeFalse())
	g.Expect(r.matches(req("PUT", "/api/v1/namespaces/db/configmaps/a", ""))).To(BeFalse(), "not seen yet")
	answer := func(body string) *objectJSON {
		o, ok := readAnswer([]byte(body))
		g.Expect(ok).To(BeTrue(), body)
		return o
	}
	p.labels.learn(Info{Verb: "list", Resource: "configmaps"},
		answer(`{"kind":"ConfigMapList","items":[{"metadata":{"name":"a","namespace":"db","labels":{"app":"db"}}}]}`))
	g.Expect(r.matches(req("PUT", "/api/v1/namespaces/db/configmaps/a", ""))).To(BeTrue(), "labels as last seen in a list")
	g.Expect(r.matches(req("GET", "/api/v1/namespaces/db/configmaps?labelSelector=app%3Ddb,x%3Dy", ""))).To(BeTrue())
	g.Expect(r.matches(req("GET", "/api/v1/namespaces/db/configmaps?labelSelector=app", ""))).To(BeFalse(), "exists is not app=db")
	g.Expect(r.matches(req("GET", "/api/v1/namespaces/db/configmaps?watch=1", ""))).To(BeFalse())
	p.labels.learn(Info{Verb: "delete", Resource: "configmaps", Namespace: "db", Name: "a"}, answer(`{"kind":"ConfigMap"}`))
	_, ok := readAnswer([]byte(`{"kind":"Status","status":"Failure"}`))
	g.Expect(ok).To(BeFalse(), "a Status holds no object")
	g.Expect(r.matches(req("PUT", "/api/v1/namespaces/db/configmaps/a", ""))).To(BeFalse(), "forgotten once deleted")
}

func TestAddRefusesAmbiguousRules(t *testing.T) {
	then := func(Request) {}
	bad := map[string]Rule{
		"two actions":              {Status: 409, Reset: true},
		"events and stale":         {Events: EventsDrop, Stale: true},
		"after with status":        {Verb: "patch", After: 1, Status: 500},
		"unknown events":           {Events: "shuffle"},
		"probability above 1":      {Status: 500, Probability: 1.5},
		"negative probability":     {Status: 500, Probability: -0.1},
		"then without after":       {Status: 500, Then: then},
		"after on a read":          {Verb: "get", After: 1, Then: then},
		"no action":                {Verb: "get"},
		"delay with drop":          {Events: EventsDrop, Delay: time.Second},
		"delay with timeout":       {Timeout: true, Delay: time.Second},
		"lag without stale":        {Status: 500, Lag: time.Second},
		"events on a write":        {Verb: "create", Events: EventsDelay},
		"stale on a write":         {Verb: "patch", Stale: true},
		"timeoutafter alone":       {Status: 500, TimeoutAfter: time.Second},
		"count on an after rule":   {After: 2, Count: 1},
		"negative delay":           {Delay: -time.Second, Status: 500},
		"stale with a delay":       {Stale: true, Delay: time.Second},
		"after with a delay":       {After: 1, Delay: time.Second},
		"reset, timeout and after": {Reset: true, Timeout: true, After: 1},
	}
	p := newProxy(1)
	for name, r := range bad {
		_, err := p.Add(r)
		NewWithT(t).Expect(err).To(HaveOccurred(), name)
	}
	good := []Rule{
		{Status: 409}, {Status: 503, Delay: time.Second}, {Reset: true, Delay: time.Second}, {Delay: time.Second},
		{Events: EventsDelay, Delay: time.Second}, {Events: EventsDelay}, {Verb: "watch", Events: EventsCoalesce},
		{Stale: true, Lag: time.Second}, {Verb: "list", Stale: true}, {Timeout: true, TimeoutAfter: time.Second},
		{Verb: "patch", After: 2, Then: then}, {After: 1}, {Status: 500, Probability: 1},
	}
	for _, r := range good {
		_, err := p.Add(r)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%+v", r)
	}
}

func TestRuleString(t *testing.T) {
	cases := map[string]Rule{
		"409 on create configmaps db/*":                     {Verb: "create", Resource: "configmaps", Namespace: "db", Status: 409},
		"delay 2s, 503 on any pods/status db/x":             {Resource: "pods", Subresource: "status", Namespace: "db", Name: "x", Status: 503, Delay: 2 * time.Second},
		"reset on get secrets (2 times)":                    {Verb: "get", Resource: "secrets", Reset: true, Count: 2},
		"timeout 1m0s on list pods":                         {Verb: "list", Resource: "pods", Timeout: true},
		"drop events of watch pods db/*":                    {Resource: "pods", Namespace: "db", Events: EventsDrop},
		"delay 2s events of watch pods labelled app=db":     {Resource: "pods", Labels: map[string]string{"app": "db"}, Events: EventsDelay, Delay: 2 * time.Second},
		"coalesce events of watch configmaps":               {Resource: "configmaps", Events: EventsCoalesce},
		"stale (lag 0s) list,get,watch statefulsets":        {Resource: "statefulsets", Stale: true},
		"after 2 writes of patch statefulsets: then":        {Verb: "patch", Resource: "statefulsets", After: 2, Then: func(Request) {}},
		"after 1 write of statefulsets":                     {Resource: "statefulsets", After: 1},
		"delay 1s on any resources (p=0.5)":                 {Delay: time.Second, Probability: 0.5},
		"500 on update databaseclusters/* labelled a=1,b=2": {Verb: "update", Resource: "databaseclusters", Subresource: "*", Labels: map[string]string{"b": "2", "a": "1"}, Status: 500},
	}
	for want, r := range cases {
		NewWithT(t).Expect(r.String()).To(Equal(want))
	}
}

func TestRuleMatchesAndCounts(t *testing.T) {
	g := NewWithT(t)
	p := newProxy(1)
	_, err := p.Add(Rule{Verb: "create", Resource: "configmaps", Namespace: "db", Count: 2, Status: 409})
	g.Expect(err).NotTo(HaveOccurred())
	create := Info{Verb: "create", Resource: "configmaps", Namespace: "db"}
	match := func(i Info) *armed { a, _ := p.matchRequest(i, labelView{}); return a }
	g.Expect(match(Info{Verb: "create", Resource: "configmaps", Namespace: "other"})).To(BeNil())
	g.Expect(match(create)).NotTo(BeNil())
	g.Expect(match(create)).NotTo(BeNil())
	g.Expect(match(create)).To(BeNil(), "spent after Count requests")
	id, err := p.Add(Rule{Verb: "create", Status: 500})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(match(create)).NotTo(BeNil())
	p.Remove(id)
	g.Expect(match(create)).To(BeNil(), "removed")
	_, _ = p.Add(Rule{Verb: "create", Status: 500})
	p.Clear()
	g.Expect(match(create)).To(BeNil(), "cleared")
}

func TestOrdinal(t *testing.T) {
	g := NewWithT(t)
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd"} {
		g.Expect(ordinal(n)).To(Equal(want))
	}
}

func TestNegotiate(t *testing.T) {
	g := NewWithT(t)
	cases := []struct {
		accept, want string
		ok           bool
	}{
		{"", "application/json", true},
		{"application/json, */*", "application/json", true},
		{"application/vnd.kubernetes.protobuf, */*", "application/json", true},
		{"application/vnd.kubernetes.protobuf,application/json", "application/json", true},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
			"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json", true},
		{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf", false},
	}
	for _, tc := range cases {
		got, ok := negotiate(tc.accept)
		g.Expect(got).To(Equal(tc.want), tc.accept)
		g.Expect(ok).To(Equal(tc.ok), tc.accept)
	}
}
