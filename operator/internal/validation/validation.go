// Package validation is every rule a DatabaseCluster spec must keep, each
// written once. The rules the CRD can state (bounds, enums, formats, CEL) are
// markers on the API types; Schema applies the generated CRD's schema and
// CEL rules in-process, so that the controller refuses what bypassed the API
// server (a fake client, an older CRD) by the very same rules. Spec holds the
// checks the CRD cannot make: a cron schedule, and container resource rules
// as the API server applies them to pods. The admission webhook refuses what
// Spec finds, one message per mistake naming the field; the controller runs
// both, so that a cluster installed without the webhook says InvalidSpec
// instead of failing further down.
package validation

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	dbv1 "github.com/gauntlet-dev/gauntlet/operator/api/v1beta1"
)

// Spec returns every mistake in c's spec that admission must refuse.
func Spec(c *dbv1.DatabaseCluster) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, Resources(spec.Child("resources"), c.Spec.Resources)...)
	if b := c.Spec.Backup; b != nil {
		p := spec.Child("backup")
		if err := Schedule(p.Child("schedule"), b.Schedule); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Schedule checks a cron schedule the way the CronJob controller parses it
// (five fields or a macro, with no time zone inside it), and that it fires:
// at least once, and at most once a minute.
func Schedule(p *field.Path, schedule string) *field.Error {
	s := strings.TrimSpace(schedule)
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return field.Invalid(p, schedule, "a time zone cannot be set inside the schedule; schedules run in the controller manager's time zone (UTC on most clusters)")
	}
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return field.Invalid(p, schedule, fmt.Sprintf("not a cron schedule (%v): use five fields, minute hour day-of-month month day-of-week, for example \"0 3 * * *\", or a macro such as @daily", err))
	}
	if msg := firing(s, sched); msg != "" {
		return field.Invalid(p, schedule, msg)
	}
	return nil
}

// scheduleEpoch is where firing starts looking: a fixed time, so that
// admission does not depend on the day it runs, with a 29 February within
// the cron library's horizon (it looks up to five years ahead).
var scheduleEpoch = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// MinScheduleInterval is the shortest time a backup schedule may leave
// between two backups.
const MinScheduleInterval = time.Minute

// firing explains why sched (parsed from s) would not take a backup at
// most once a minute, or returns "". A five-field schedule that matches no
// date (31 February) has no next activation within the library's five
// years; a leap day does. Two consecutive activations tell the interval:
// only @every can fire more often than once a minute (five fields have no
// seconds), and its interval is constant.
func firing(s string, sched cron.Schedule) string {
	first := sched.Next(scheduleEpoch)
	if first.IsZero() {
		return "never fires: no date matches its day-of-month and month (such as 31 February); use days that exist in the chosen months, for example \"0 3 28 2 *\""
	}
	every := sched.Next(first).Sub(first)
	if every >= MinScheduleInterval {
		return ""
	}
	msg := fmt.Sprintf("fires every %s, more often than once a minute: use an interval of at least 1m, for example \"@every 5m\" or \"*/5 * * * *\"", every)
	if d, found := strings.CutPrefix(s, "@every "); found {
		if given, err := time.ParseDuration(d); err == nil && given != every {
			msg += fmt.Sprintf(" (the cron library runs @every %s every %s: it counts in whole seconds, at least one)", given, every)
		}
	}
	return msg
}

// Resources checks container resources as the API server will when the
// StatefulSet controller creates the pods: the names a container may ask
// for, no negative amounts, requests within limits, limits required (and
// equal to requests) for hugepages and extended resources, and no claims
// (the operator adds no pod-level resource claims).
func Resources(p *field.Path, r corev1.ResourceRequirements) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Limits {
		errs = append(errs, quantity(p.Child("limits").Key(string(name)), name, q)...)
	}
	for name, q := range r.Requests {
		kp := p.Child("requests").Key(string(name))
		errs = append(errs, quantity(kp, name, q)...)
		limit, hasLimit := r.Limits[name]
		switch {
		case exact(name) && !hasLimit:
			errs = append(errs, field.Required(p.Child("limits").Key(string(name)), fmt.Sprintf("%s cannot be overcommitted: set a limit equal to the request", name)))
		case exact(name) && q.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(kp, q.String(), fmt.Sprintf("%s cannot be overcommitted: the request must equal the limit (%s)", name, limit.String())))
		case hasLimit && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(kp, q.String(), fmt.Sprintf("more than the limit of %s", limit.String())))
		}
	}
	if len(r.Claims) > 0 {
		errs = append(errs, field.Forbidden(p.Child("claims"), "resource claims need pod-level claims, which the operator does not add; remove them"))
	}
	return errs
}

func quantity(p *field.Path, name corev1.ResourceName, q resource.Quantity) field.ErrorList {
	var errs field.ErrorList
	if msg := resourceName(name); msg != "" {
		errs = append(errs, field.Invalid(p, string(name), msg))
	}
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(p, q.String(), "must not be negative"))
	}
	if extended(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(p, q.String(), "an extended resource is counted in whole units"))
	}
	return errs
}

// resourceName explains why name is not one a container may ask for, or
// returns "".
func resourceName(name corev1.ResourceName) string {
	switch {
	case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage:
		return ""
	case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		if _, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix)); err != nil {
			return "not a hugepages size such as hugepages-2Mi"
		}
		return ""
	case extended(name):
		if msgs := validation.IsQualifiedName(string(name)); len(msgs) > 0 {
			return "not a valid extended resource name: " + strings.Join(msgs, "; ")
		}
		return ""
	case strings.Contains(string(name), "/"):
		return "the kubernetes.io domain has no such container resource"
	default:
		return "not a container resource: use cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified extended resource such as example.com/gpu"
	}
}

// extended is a domain-qualified resource outside kubernetes.io.
func extended(name corev1.ResourceName) bool {
	domain, _, found := strings.Cut(string(name), "/")
	return found && domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

// exact resources cannot be overcommitted: a request must equal its limit.
func exact(name corev1.ResourceName) bool {
	return extended(name) || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}
