package framework

import (
	"fmt"
	"strings"

	"github.com/onsi/gomega/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionsGetter is implemented by API objects that expose
// status.conditions. Any kind can opt in with a one-line method.
type ConditionsGetter interface {
	GetConditions() []metav1.Condition
}

// ConditionMatcher matches one condition by type, status and reason, and
// optionally observedGeneration and a message substring.
type ConditionMatcher struct {
	condType          string
	status            metav1.ConditionStatus
	reason            string
	observedGen       *int64
	messageSubstrings []string
}

var _ types.GomegaMatcher = &ConditionMatcher{}

// HaveCondition matches an object (a ConditionsGetter) or a []metav1.Condition
// that has a condition of the given type with the given status and reason.
// An empty reason matches any reason.
func HaveCondition(condType string, status metav1.ConditionStatus, reason string) *ConditionMatcher {
	return &ConditionMatcher{condType: condType, status: status, reason: reason}
}

// WithObservedGeneration also requires the condition's observedGeneration.
func (m *ConditionMatcher) WithObservedGeneration(g int64) *ConditionMatcher {
	m.observedGen = &g
	return m
}

// WithMessageContaining also requires the message to contain each substring.
func (m *ConditionMatcher) WithMessageContaining(substrings ...string) *ConditionMatcher {
	m.messageSubstrings = append(m.messageSubstrings, substrings...)
	return m
}

// Match implements types.GomegaMatcher.
func (m *ConditionMatcher) Match(actual any) (bool, error) {
	conds, err := conditionsOf(actual)
	if err != nil {
		return false, err
	}
	for _, c := range conds {
		if c.Type != m.condType {
			continue
		}
		return m.matches(c), nil
	}
	return false, nil
}

func (m *ConditionMatcher) matches(c metav1.Condition) bool {
	if c.Status != m.status || (m.reason != "" && c.Reason != m.reason) {
		return false
	}
	if m.observedGen != nil && c.ObservedGeneration != *m.observedGen {
		return false
	}
	for _, s := range m.messageSubstrings {
		if !strings.Contains(c.Message, s) {
			return false
		}
	}
	return true
}

// FailureMessage implements types.GomegaMatcher.
func (m *ConditionMatcher) FailureMessage(actual any) string {
	return fmt.Sprintf("expected condition %s\n%s", m.describe(), describeConditions(actual))
}

// NegatedFailureMessage implements types.GomegaMatcher.
func (m *ConditionMatcher) NegatedFailureMessage(actual any) string {
	return fmt.Sprintf("expected no condition %s\n%s", m.describe(), describeConditions(actual))
}

func (m *ConditionMatcher) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s=%s", m.condType, m.status)
	if m.reason != "" {
		fmt.Fprintf(&b, " reason=%s", m.reason)
	}
	if m.observedGen != nil {
		fmt.Fprintf(&b, " observedGeneration=%d", *m.observedGen)
	}
	for _, s := range m.messageSubstrings {
		fmt.Fprintf(&b, " message~%q", s)
	}
	return b.String()
}

func conditionsOf(actual any) ([]metav1.Condition, error) {
	switch a := actual.(type) {
	case ConditionsGetter:
		return a.GetConditions(), nil
	case []metav1.Condition:
		return a, nil
	default:
		return nil, fmt.Errorf("HaveCondition expects a ConditionsGetter or []metav1.Condition, got %T", actual)
	}
}

// DescribeConditions renders conditions one per line, for failure messages.
func DescribeConditions(conds []metav1.Condition) string {
	if len(conds) == 0 {
		return "  (no conditions)"
	}
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "  %s=%s reason=%s observedGeneration=%d: %s\n", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	return strings.TrimRight(b.String(), "\n")
}

func describeConditions(actual any) string {
	conds, err := conditionsOf(actual)
	if err != nil {
		return err.Error()
	}
	return "conditions were:\n" + DescribeConditions(conds)
}
