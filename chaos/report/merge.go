package report

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MergeCampaigns joins the reports of a sharded campaign's shards (each
// with a Campaign whose Shard is "k/n", all of one seed and base) into the
// report of the whole: every run, every finding, the fields any shard
// changed and when the first did. The shards ran side by side, so the
// campaign took as long as its slowest shard, and its pace is their sum.
// Every shard makes the reference run (explore-0) before its share: it is
// kept once, with its finding if it broke an oracle. A shard that left no
// report is not there to merge: the caller says so.
func MergeCampaigns(parts []*Report) (*Report, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("no shard's report to merge")
	}
	first := parts[0].Campaign
	if first == nil {
		return nil, fmt.Errorf("the first report is not a campaign's")
	}
	if first.Shard == "" {
		return nil, fmt.Errorf("the campaign from %s (seed %d) ran unsharded: there is nothing to merge it with", first.Base, first.Seed)
	}
	_, n, err := ParseShard(first.Shard)
	if err != nil {
		return nil, err
	}
	merged := &Report{APIVersion: ReportAPIVersion, Kind: ReportKind, Seed: parts[0].Seed, Started: parts[0].Started, Cluster: parts[0].Cluster}
	x := &Campaign{Base: first.Base, Seed: first.Seed, Shards: n, OnCluster: first.OnCluster, Set: first.Set, Fields: first.Fields, Skipped: first.Skipped,
		Refused: first.Refused, VersionSkews: first.VersionSkews, CrossVersion: first.CrossVersion,
		CoveredAfter: map[string]time.Duration{}}
	seen := map[int]bool{}
	follows := map[string]bool{}
	results, findings := map[string]bool{}, map[string]bool{}
	steps := 0.0
	for _, p := range parts {
		c := p.Campaign
		if c == nil {
			return nil, fmt.Errorf("a report of seed %d is not a campaign's", p.Seed)
		}
		k, m, err := ParseShard(c.Shard)
		if err != nil {
			return nil, err
		}
		if c.Seed != first.Seed || c.Base != first.Base || m != n || !slices.Equal(c.Fields, first.Fields) {
			return nil, fmt.Errorf("shard %s (seed %d, from %s, %d fields) is not of the campaign of shard %s (seed %d, from %s, %d fields)",
				c.Shard, c.Seed, c.Base, len(c.Fields), first.Shard, first.Seed, first.Base, len(first.Fields))
		}
		if seen[k] {
			return nil, fmt.Errorf("shard %s twice", c.Shard)
		}
		seen[k] = true
		if p.Started.Before(merged.Started) {
			merged.Started = p.Started
		}
		merged.Results = once(merged.Results, p.Results, results, func(r *Result) string { return r.Scenario })
		for _, f := range c.Follows {
			follows[f] = true
		}
		for f, after := range c.CoveredAfter {
			if was, ok := x.CoveredAfter[f]; !ok || after < was {
				x.CoveredAfter[f] = after
			}
		}
		x.Runs += c.Runs
		x.Findings = once(x.Findings, c.Findings, findings, func(f Finding) string { return f.Scenario })
		x.Took = max(x.Took, c.Took)
		steps += c.StepsPerMinute * c.Took.Minutes()
	}
	x.Follows = slices.Sorted(maps.Keys(follows))
	x.Covered = slices.Sorted(maps.Keys(x.CoveredAfter))
	if len(x.Covered) == len(x.Fields) {
		for _, after := range x.CoveredAfter {
			x.AllCoveredAfter = max(x.AllCoveredAfter, after)
		}
	}
	if x.Took > 0 {
		x.StepsPerMinute = steps / x.Took.Minutes()
	}
	slices.SortStableFunc(x.Findings, func(a, b Finding) int { return cmp.Compare(a.After, b.After) })
	x.Causes = GroupFindings(x.Findings)
	slices.SortStableFunc(merged.Results, func(a, b *Result) int { return cmp.Compare(runNumber(a), runNumber(b)) })
	if merged.Cluster != "" {
		merged.Cluster = fmt.Sprintf("%s in each of %d shards", merged.Cluster, n)
	}
	merged.Campaign = x
	return merged, nil
}

// once appends to out each of items whose name it has not seen.
func once[T any](out, items []T, seen map[string]bool, name func(T) string) []T {
	for _, it := range items {
		if n := name(it); !seen[n] {
			seen[n] = true
			out = append(out, it)
		}
	}
	return out
}

// ParseShard reads a shard, "k/n".
func ParseShard(s string) (k, n int, err error) {
	ks, ns, ok := strings.Cut(s, "/")
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || k < 0 || k >= n {
		return 0, 0, fmt.Errorf("shard %q: want k/n with 0 <= k < n", s)
	}
	return k, n, nil
}

// runNumber is the N of a campaign's run explore-N (and its -fresh twin);
// other runs sort first.
func runNumber(r *Result) int {
	if r.Run == nil {
		return -1
	}
	s := strings.TrimPrefix(r.Scenario, "explore-")
	s, _, _ = strings.Cut(s, "-")
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
