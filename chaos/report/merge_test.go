package report

import (
	"strings"
	"testing"
	"time"
)

func shardReport(shard string, took time.Duration, pace float64, covered map[string]time.Duration, runs ...string) *Report {
	r := &Report{Seed: 7, Started: time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)}
	for _, n := range runs {
		r.Results = append(r.Results, &Result{Run: &Run{Scenario: n}})
	}
	r.Campaign = &Campaign{Base: "scale-up", Seed: 7, Shard: shard, Fields: []string{"spec.a", "spec.b", "spec.c"},
		Refused: []string{"spec.a=-1"}, CoveredAfter: covered, Runs: len(runs), Took: took, StepsPerMinute: pace,
		Follows: []string{"spec.a → StatefulSet/x spec.replicas"}}
	return r
}

func TestMergeCampaigns(t *testing.T) {
	// Each shard made the reference run, which broke an oracle at its
	// deletion: it is merged once.
	a := shardReport("0/2", 10*time.Minute, 3, map[string]time.Duration{"spec.a": time.Minute, "spec.b": 4 * time.Minute}, "explore-0", "explore-1", "explore-3")
	a.Campaign.Findings = []Finding{{Scenario: "explore-0", After: 30 * time.Second}, {Scenario: "explore-3", After: 5 * time.Minute}}
	b := shardReport("1/2", 8*time.Minute, 5, map[string]time.Duration{"spec.b": 2 * time.Minute, "spec.c": 6 * time.Minute}, "explore-0", "explore-2", "explore-4-fresh", "explore-4")
	b.Campaign.Findings = []Finding{{Scenario: "explore-0", After: 31 * time.Second}, {Scenario: "explore-2", After: time.Minute}}
	b.Started = a.Started.Add(-time.Second)

	m, err := MergeCampaigns([]*Report{a, b})
	if err != nil {
		t.Fatal(err)
	}
	x := m.Campaign
	if x.Shards != 2 || x.Shard != "" {
		t.Errorf("shards %d, shard %q; want 2 and none", x.Shards, x.Shard)
	}
	if x.Runs != 7 || len(m.Results) != 6 {
		t.Errorf("runs %d, results %d; want 7 (each shard made its reference run) and 6 (explore-0 once)", x.Runs, len(m.Results))
	}
	var names []string
	for _, r := range m.Results {
		names = append(names, r.Scenario)
	}
	if got := strings.Join(names, " "); got != "explore-0 explore-1 explore-2 explore-3 explore-4-fresh explore-4" {
		t.Errorf("results in the order %s", got)
	}
	if x.CoveredAfter["spec.b"] != 2*time.Minute {
		t.Errorf("spec.b first changed after %s, want the earlier shard's 2m", x.CoveredAfter["spec.b"])
	}
	if strings.Join(x.Covered, ",") != "spec.a,spec.b,spec.c" || x.AllCoveredAfter != 6*time.Minute {
		t.Errorf("covered %v, every field after %s; want all three after 6m", x.Covered, x.AllCoveredAfter)
	}
	if x.Took != 10*time.Minute || x.StepsPerMinute != 7 {
		t.Errorf("took %s at %.2f steps/min; want the slowest shard's 10m and (3*10+5*8)/10 = 7", x.Took, x.StepsPerMinute)
	}
	if len(x.Findings) != 3 || x.Findings[0].Scenario != "explore-0" || x.Findings[1].Scenario != "explore-2" {
		t.Errorf("findings %+v; want explore-0 once, then the others, the earliest first", x.Findings)
	}
	if len(x.Follows) != 1 || len(x.Refused) != 1 {
		t.Errorf("follows %v, refused %v; want each once", x.Follows, x.Refused)
	}
	if !m.Started.Equal(b.Started) {
		t.Errorf("started %s, want the earliest shard's %s", m.Started, b.Started)
	}
}

func TestMergeCampaignsRefusesStrangers(t *testing.T) {
	cov := map[string]time.Duration{}
	for _, tc := range []struct {
		name  string
		parts []*Report
		want  string
	}{
		{"none", nil, "no shard"},
		{"unsharded", []*Report{shardReport("", 0, 0, cov)}, "unsharded"},
		{"twice", []*Report{shardReport("0/2", 0, 0, cov), shardReport("0/2", 0, 0, cov)}, "twice"},
		{"other count", []*Report{shardReport("0/2", 0, 0, cov), shardReport("1/3", 0, 0, cov)}, "is not of the campaign"},
		{"out of range", []*Report{shardReport("2/2", 0, 0, cov)}, "0 <= k < n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MergeCampaigns(tc.parts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	other := shardReport("1/2", 0, 0, cov)
	other.Campaign.Seed = 8
	if _, err := MergeCampaigns([]*Report{shardReport("0/2", 0, 0, cov), other}); err == nil {
		t.Error("merged shards of two seeds")
	}
}
