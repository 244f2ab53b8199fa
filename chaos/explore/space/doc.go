// Package space is the search space of an explore campaign (package
// explore): the changes to a custom resource's spec that its CRD's
// structural schema admits (types, enums, bounds, lengths, defaults), the
// seeded plan that orders them alone and in sequences, how long a run of
// them is waited for, and the shrinking of a failing sequence to the
// fewest steps that still fail.
//
// It knows no operator, no cluster and no run: it reads a schema and
// values, and returns steps. The campaign runs them as scenarios through
// the engine, which judges them.
package space
