// Package chaos is the reference operator's chaos tier: its scenarios are
// files (scenarios/, run by the engine in
// github.com/gauntlet-dev/gauntlet/chaos/engine, as `gauntlet run` runs
// them), and chaos_test.go, behind the e2e build tag, runs them under go
// test: every scenario (make test-chaos) and the bug the tier must catch
// (make test-chaos-bug). No Go here is written for this operator: another
// brings its own folder of files.
package chaos
