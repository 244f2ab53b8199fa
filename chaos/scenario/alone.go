package scenario

import "fmt"

// Alone says why the scenario cannot share a cluster with scenarios run
// at the same time, or "" when it can. A scenario shares when everything
// it breaks lies in its own namespace: its pods, their network, their
// volumes. It runs alone when it breaks what every scenario depends on:
// a node (and every pod on it), the operator's pods or its path to the
// API server, or the API proxy's view of every resource; or when its
// oracle restarts the operator.
func (s *Scenario) Alone() string {
	sp := s.Spec
	switch {
	case sp.Fault.Action == ActionNodeLoss:
		return "its fault stops a node, with every pod on it"
	case IsViewAction(sp.Fault.Action):
		return "its view fault acts on the operator's requests, whatever the resource"
	case sp.Assertions.SameAsFresh:
		return "the differential oracle restarts the operator"
	}
	hit := []string{sp.Fault.Target, sp.Fault.Peer}
	for _, steps := range [][]Action{sp.Before, sp.During} {
		for _, a := range steps {
			if a.DeletePods != nil {
				hit = append(hit, a.DeletePods.Role)
			}
		}
	}
	for _, name := range hit {
		switch s.reaches(name) {
		case roleOperator:
			return fmt.Sprintf("it acts on role %s, the operator's pods", name)
		case roleAPIServer:
			return fmt.Sprintf("it cuts role %s, the operator's path to the API server", name)
		}
	}
	return ""
}

const (
	roleOperator  = "operator"
	roleAPIServer = "apiServer"
)

// reaches says whether a role, through the roles it narrows, is the
// operator's pods or the API server ("" when neither, or unknown).
func (s *Scenario) reaches(name string) string {
	seen := map[string]bool{}
	for name != "" && !seen[name] {
		seen[name] = true
		r, ok := s.Spec.Roles[name]
		switch {
		case !ok:
			return ""
		case r.Operator:
			return roleOperator
		case r.APIServer:
			return roleAPIServer
		}
		name = r.From
	}
	return ""
}
