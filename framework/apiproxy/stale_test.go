package apiproxy

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestStaleKey(t *testing.T) {
	g := NewWithT(t)
	key := func(target string) string {
		r := httptest.NewRequest("GET", target, nil)
		return staleKey(&exchange{info: parseRequest(r), query: r.URL.Query(), accept: "application/json"})
	}
	base := key("/api/v1/namespaces/db/pods?labelSelector=app%3Ddb&limit=500")
	g.Expect(key("/api/v1/namespaces/db/pods?limit=500&labelSelector=app%3Ddb&resourceVersion=12&resourceVersionMatch=NotOlderThan&timeout=30s&timeoutSeconds=5&allowWatchBookmarks=true")).
		To(Equal(base), "freshness and time limits do not make another read")
	g.Expect(key("/api/v1/namespaces/db/pods?labelSelector=app%3Dweb&limit=500")).NotTo(Equal(base))
	g.Expect(key("/api/v1/namespaces/db/pods?labelSelector=app%3Ddb&limit=500&continue=x")).NotTo(Equal(base))
	g.Expect(key("/api/v1/namespaces/other/pods?labelSelector=app%3Ddb&limit=500")).NotTo(Equal(base))
}

func TestRecorder(t *testing.T) {
	g := NewWithT(t)
	var rc recorder
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rc.add("k", record{at: at(1), status: 200, body: []byte("one")})
	rc.add("k", record{at: at(2), status: 200, body: []byte("one")})
	rc.add("k", record{at: at(3), status: 200, body: []byte("two")})
	_, ok := rc.before("k", at(0))
	g.Expect(ok).To(BeFalse(), "nothing recorded by then")
	r, _ := rc.before("k", at(2))
	g.Expect(r.at).To(Equal(at(1)), "the same answer twice is kept once, from when it was first seen")
	g.Expect(string(r.body)).To(Equal("one"))
	r, _ = rc.before("k", at(10))
	g.Expect(string(r.body)).To(Equal("two"))
	_, ok = rc.before("other", at(10))
	g.Expect(ok).To(BeFalse())

	for i := range 100 {
		rc.add("k", record{at: at(10 + i), status: 200, body: fmt.Appendf(nil, "%d", i)})
	}
	g.Expect(rc.byKey["k"]).To(HaveLen(maxRecordsPerKey))
	r, _ = rc.before("k", at(200))
	g.Expect(string(r.body)).To(Equal("99"))
	_, ok = rc.before("k", at(10+100-maxRecordsPerKey-1))
	g.Expect(ok).To(BeFalse(), "older records were dropped")
	g.Expect(rc.live).To(Equal(maxRecordsPerKey))
	g.Expect(len(rc.order)).To(BeNumerically("<=", 2*rc.live+1024))
}

func TestRecorderByteBudget(t *testing.T) {
	g := NewWithT(t)
	var rc recorder
	big := make([]byte, maxRecordBytes/4)
	for i := range 10 {
		b := append([]byte(nil), big...)
		b[0] = byte(i)
		rc.add(fmt.Sprint("k", i), record{at: time.Now(), status: 200, body: b})
	}
	g.Expect(rc.bytes).To(BeNumerically("<=", maxRecordBytes))
	g.Expect(rc.byKey).To(HaveLen(4))
	g.Expect(rc.byKey).To(HaveKey("k9"), "the newest stay")
	g.Expect(rc.byKey).NotTo(HaveKey("k0"))
}
