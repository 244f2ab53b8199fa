package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     string
		wantErr string
	}{
		{"defaults with a namespace", nil, "ops", ""},
		{"webhooks need POD_NAMESPACE", nil, "", "POD_NAMESPACE must be set"},
		{"webhooks off need no namespace", []string{"--enable-webhooks=false"}, "", ""},
		{"concurrency zero", []string{"--max-concurrent-reconciles=0"}, "ops", "--max-concurrent-reconciles must be between 1 and 64, got 0"},
		{"concurrency too high", []string{"--max-concurrent-reconciles=65"}, "ops", "between 1 and 64, got 65"},
		{"empty cluster domain", []string{"--cluster-domain="}, "ops", "--cluster-domain must not be empty"},
		{"bad webhook port", []string{"--webhook-port=0"}, "ops", "--webhook-port must be between 1 and 65535"},
		{"bad qps", []string{"--kube-api-qps=0"}, "ops", "--kube-api-qps must be positive, or -1"},
		{"negative qps other than -1", []string{"--kube-api-qps=-2"}, "ops", "--kube-api-qps must be positive, or -1"},
		{"qps limit", []string{"--kube-api-qps=200", "--kube-api-burst=400"}, "ops", ""},
		{"bad burst", []string{"--kube-api-burst=0"}, "ops", "--kube-api-burst at least 1"},
		{"unknown flag", []string{"--replicas=3"}, "ops", "flag provided but not defined: -replicas"},
		{"not a number", []string{"--max-concurrent-reconciles=four"}, "ops", "invalid value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("POD_NAMESPACE", tc.env)
			o, err := parseFlags(tc.args)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.maxConcurrentReconciles).To(BeNumerically(">=", 1))
		})
	}
}
