// Package explore runs `gauntlet explore` campaigns: from one base
// scenario, it draws changes to the resource's spec from its CRD's schema
// (package space), keeps those the API server admits (dry runs), runs
// each sequence as a scenario through the engine, some under a fault
// learned from a reference run (package faultplan), judges every run by
// the automatic oracles (report.Judge), shrinks a failing sequence to the
// fewest steps that still fail and writes it as a scenario file that
// `gauntlet run` replays.
//
// It owns how a campaign chooses, runs and records its steps. It must not
// know how a run is made or judged (the engine's: it sees a run's report),
// how a fault is injected (the engine's view faults and Chaos Mesh), or
// any operator: everything it tries comes from the schema and from what
// the reference run did.
package explore
