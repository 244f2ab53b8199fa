// Package budget is the disruption-budget oracle of a run: as the
// operator, through the API proxy, asks to delete a pod of the resource's
// namespace, it judges the deletion against the PodDisruptionBudgets that
// cover the pod, before the request goes on. It knows the proxy's write
// hook and the cluster's pods and budgets, not the run that uses it.
package budget
