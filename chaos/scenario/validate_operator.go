package scenario

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

func (c *checker) operator(o *Operator, dir string) {
	c.metadata(o.Metadata)
	s := o.Spec
	var manifests []string
	for _, m := range s.Manifests {
		manifests = append(manifests, filepath.Join(dir, m))
	}
	c.variables(s.Variables, s, manifests...)
	switch {
	case s.Kustomize == "" && len(s.Manifests) == 0:
		c.at("spec", "one of kustomize or manifests is required")
	case s.Kustomize != "" && len(s.Manifests) > 0:
		c.at("spec.manifests", "set kustomize or manifests, not both")
	case s.Kustomize != "":
		c.relFile("spec.kustomize", s.Kustomize, dir)
	default:
		for i, m := range s.Manifests {
			c.relFile(fmt.Sprintf("spec.manifests[%d]", i), m, dir)
		}
	}
	for i, x := range s.Exclude {
		if x.Kind == "" {
			c.at(fmt.Sprintf("spec.exclude[%d].kind", i), "required: the kind of the objects to leave out")
		}
	}
	for i, img := range s.Images {
		if img.Name == "" {
			c.at(fmt.Sprintf("spec.images[%d].name", i), "required")
		}
	}
	for k := range s.Env {
		if !envName.MatchString(k) {
			c.at("spec.env."+k, "%q is not an environment variable name", k)
		}
	}
	if !slices.ContainsFunc(s.Images, func(img Image) bool { return img.Replaces != "" }) {
		const why = "needs an image with replaces: the container it is set on is the one that runs that image"
		if len(s.Args) > 0 {
			c.at("spec.args", why)
		}
		if len(s.Env) > 0 {
			c.at("spec.env", why)
		}
	}
	if s.Namespace == "" {
		c.at("spec.namespace", "required: where the operator's pods run")
	} else {
		for _, msg := range validation.IsDNS1123Label(s.Namespace) {
			c.at("spec.namespace", "%q is not a namespace name: %s", s.Namespace, msg)
		}
	}
	if len(s.Selector) == 0 {
		c.at("spec.selector", "required: the labels of the operator's pods")
	}
	c.process(s.Process)
	c.podSecurity("spec.podSecurity", s.PodSecurity)
	if m := s.Metrics; m != nil {
		c.port("spec.metrics.port", m.Port)
		if m.Path != "" && !strings.HasPrefix(m.Path, "/") {
			c.at("spec.metrics.path", "%q: want an absolute path such as /metrics", m.Path)
		}
	}
}

// process checks how the operator runs as a process.
func (c *checker) process(pr *Process) {
	if pr == nil {
		return
	}
	if len(pr.Command) == 0 || pr.Command[0] == "" {
		c.at("spec.process.command", "required: the operator's program and arguments")
	}
	for k := range pr.Env {
		if !envName.MatchString(k) {
			c.at("spec.process.env."+k, "%q is not an environment variable name", k)
		}
	}
}

func (c *checker) podSecurity(path, level string) {
	if level != "" && !slices.Contains(PodSecurityLevels, level) {
		c.at(path, "%q: want one of %s (the Pod Security Standard level the scenario's namespace enforces)", level, strings.Join(PodSecurityLevels, ", "))
	}
}

func (c *checker) port(path string, p int32) {
	if p < 1 || p > 65535 {
		c.at(path, "%d is not a port (1-65535)", p)
	}
}
