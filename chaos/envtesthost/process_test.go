package envtesthost

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestProcessRestartsAndStops: a killed process is started again and
// counted; stop ends it for good, even while the supervisor is between an
// exit and the next start, and nothing runs after it.
func TestProcessRestartsAndStops(t *testing.T) {
	g := NewWithT(t)
	p := &process{name: "sleep", args: []string{"600"}, logf: t.Logf}
	g.Expect(p.start()).To(Succeed())
	first := p.pid()
	g.Expect(p.kill()).To(Succeed())
	g.Eventually(p.restarts).WithTimeout(10*time.Second).Should(Equal(1), "started again after the kill")
	g.Expect(p.pid()).NotTo(Equal(first))

	g.Expect(p.kill()).To(Succeed()) // the supervisor is now in its back-off
	stopped := make(chan struct{})
	go func() { p.stop(5 * time.Second); close(stopped) }()
	g.Eventually(stopped).WithTimeout(10*time.Second).Should(BeClosed(), "stop returns during the back-off")
	g.Consistently(p.restarts).WithTimeout(time.Second).Should(Equal(1), "nothing started after stop")
}
