package install

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The templates under manifests/, in the order their objects are applied:
// after the CRDs (and the namespace, which the apply puts first), with the
// certificate Secrets between the two lists, before the workloads that
// mount them.
var (
	manifestsBeforeSecrets = []string{"namespace.yaml", "rbac.yaml", "services.yaml"}
	manifestsAfterSecrets  = []string{"controller-manager.yaml", "chaos-daemon.yaml", "webhooks.yaml"}
)

//go:embed manifests/*.yaml
var manifests embed.FS

//go:embed crds/*.yaml
var crds embed.FS

// webhook is a chaos kind the controller registers defaulting and
// validation webhooks for: its lower-case kind (the webhook path, as
// controller-runtime names it) and its resource (plural).
type webhook struct {
	Kind, Resource string
}

// webhooks are the kinds cmd/chaos-controller-manager registers (the chaos
// kinds, PhysicalMachine, StatusCheck, Schedule and Workflow). The chart
// also lists RemoteCluster, for which the controller serves no webhook
// path: leaving it out keeps RemoteCluster writes from failing on a 404.
var webhooks = []webhook{
	{"awschaos", "awschaos"},
	{"azurechaos", "azurechaos"},
	{"blockchaos", "blockchaos"},
	{"dnschaos", "dnschaos"},
	{"gcpchaos", "gcpchaos"},
	{"httpchaos", "httpchaos"},
	{"iochaos", "iochaos"},
	{"jvmchaos", "jvmchaos"},
	{"kernelchaos", "kernelchaos"},
	{"networkchaos", "networkchaos"},
	{"physicalmachinechaos", "physicalmachinechaos"},
	{"podchaos", "podchaos"},
	{"stresschaos", "stresschaos"},
	{"timechaos", "timechaos"},
	{"physicalmachine", "physicalmachines"},
	{"statuscheck", "statuschecks"},
	{"schedule", "schedules"},
	{"workflow", "workflows"},
}

// values fill the manifest templates.
type values struct {
	Namespace                    string
	ControllerImage, DaemonImage string
	PauseImage                   string
	SocketDir, SocketInContainer string
	CABundle                     string
	CertificatesFingerprint      string
	Webhooks                     []webhook
}

func newValues(o Options, c *certificates) values {
	return values{
		Namespace:               o.Namespace,
		ControllerImage:         o.ControllerImage,
		DaemonImage:             o.DaemonImage,
		PauseImage:              o.PauseImage,
		SocketDir:               path.Dir(o.RuntimeSocket),
		SocketInContainer:       path.Join("/host-run", path.Base(o.RuntimeSocket)),
		CABundle:                base64.StdEncoding.EncodeToString(c.CA),
		CertificatesFingerprint: c.fingerprint(),
		Webhooks:                webhooks,
	}
}

// render returns every object Install applies, in order: the CRDs, then
// the manifests with the certificate Secrets in their place.
func render(o Options, c *certificates) ([]*unstructured.Unstructured, error) {
	objs, err := CRDs()
	if err != nil {
		return nil, err
	}
	v := newValues(o, c)
	before, err := renderFiles(manifestsBeforeSecrets, v)
	if err != nil {
		return nil, err
	}
	objs = append(objs, before...)
	for _, s := range c.secrets(o.Namespace) {
		u, err := toUnstructured(s)
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	after, err := renderFiles(manifestsAfterSecrets, v)
	if err != nil {
		return nil, err
	}
	return append(objs, after...), nil
}

func renderFiles(names []string, v values) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, name := range names {
		text, err := manifests.ReadFile("manifests/" + name)
		if err != nil {
			return nil, err
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("parsing manifests/%s: %w", name, err)
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, v); err != nil {
			return nil, fmt.Errorf("rendering manifests/%s: %w", name, err)
		}
		docs, err := decodeYAML(out.Bytes())
		if err != nil {
			return nil, fmt.Errorf("manifests/%s: %w", name, err)
		}
		objs = append(objs, docs...)
	}
	return objs, nil
}

// CRDs returns the Chaos Mesh CustomResourceDefinitions kept in crds/
// (controller-gen output for the api module the images were built
// against).
func CRDs() ([]*unstructured.Unstructured, error) {
	files, err := fs.Glob(crds, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := crds.ReadFile(f)
		if err != nil {
			return nil, err
		}
		docs, err := decodeYAML(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, d := range docs {
			if d.GetKind() != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: a %s, not a CustomResourceDefinition", f, d.GetKind())
			}
		}
		out = append(out, docs...)
	}
	if len(out) == 0 {
		return nil, errors.New("no CRDs embedded from chaos/install/crds")
	}
	return out, nil
}

// decodeYAML splits a multi-document YAML stream into objects (empty
// documents and comments are skipped).
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
}

func toUnstructured(s *corev1.Secret) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	// The converter writes creationTimestamp: null; an apply must not
	// claim fields it does not mean to set.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// commonLabels are the labels of every object Install makes.
func commonLabels(component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "chaos-mesh",
		"app.kubernetes.io/component":  component,
		"app.kubernetes.io/managed-by": "gauntlet",
	}
}
