package k8s

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Check names a kind of problem; each has a test over a broken kustomization.
type Check string

// The checks. Every one of them can fail: testdata/broken has a kustomization for each.
const (
	CheckRender    Check = "render"    // kustomize could not build the kustomization
	CheckKind      Check = "kind"      // apiVersion/kind neither built in nor a loaded CRD
	CheckSchema    Check = "schema"    // strict decoding or CRD schema validation failed
	CheckProbes    Check = "probes"    // a long-running container without readiness/liveness probe
	CheckResources Check = "resources" // a container without cpu/memory requests and limits
	CheckSecurity  Check = "security"  // not runAsNonRoot, readOnlyRootFilesystem, no privilege escalation
	CheckPDB       Check = "pdb"       // a Deployment no PodDisruptionBudget selects
	CheckHPA       Check = "hpa"       // a Deployment no HorizontalPodAutoscaler targets
	CheckRoute     Check = "route"     // an HTTPRoute that admits a non-public path
	CheckImage     Check = "image"     // an image without a tag, or tagged latest
	CheckEnv       Check = "env"       // a variable a service reads without a source
)

// Problem is one finding about one rendered object.
type Problem struct {
	Check     Check
	Kind      string
	Namespace string
	Name      string
	Detail    string
}

func (p Problem) String() string {
	name := p.Name
	if p.Namespace != "" {
		name = p.Namespace + "/" + p.Name
	}
	return fmt.Sprintf("%s %s: %s: %s", p.Kind, name, p.Check, p.Detail)
}

// DefaultAdminPaths are the path prefixes no HTTPRoute may admit: the services' admin,
// internal (service-to-service) and reconcile APIs, the Prometheus scrape endpoint and stock's
// SKU API, which only order and payment-adapter call.
var DefaultAdminPaths = []string{"/v1/admin", "/v1/internal", "/v1/reconcile", "/metrics", "/v1/skus"}

// Validator validates rendered objects. The zero value validates core kinds and the policy,
// reports every custom resource as an unknown kind and skips the environment check.
type Validator struct {
	// CRDs are the custom resource schemas (CloudNativePG, Gateway API).
	CRDs CRDs
	// Env maps a service name to the environment variables it reads (ServiceEnv). A container
	// runs service s when its image's last path element, without tag, is s; every such
	// container (Deployment, StatefulSet or Job, init containers too) needs a source for
	// each variable, and each service needs a Deployment.
	Env map[string][]string
	// ExternalSecrets are the Secrets the manifests reference but do not contain (created
	// out of band), by name, with the keys they are documented to have. CloudNativePG's
	// <cluster>-app Secret of every rendered Cluster is external without being listed.
	ExternalSecrets map[string][]string
	// AdminPaths are the paths no HTTPRoute may admit; nil means DefaultAdminPaths.
	AdminPaths []string
}

// Check renders the kustomization in dir and validates it; a render error is one problem.
func (v *Validator) Check(dir string) []Problem {
	objs, err := Render(dir)
	if err != nil {
		return []Problem{{Check: CheckRender, Kind: "Kustomization", Name: dir, Detail: err.Error()}}
	}
	return v.Validate(objs)
}

// decoded is an object after schema validation: typed for the kinds the policy reads.
type decoded struct {
	Object
	typed runtime.Object // a k8s.io/api type, a gatewayv1 type, or nil
}

// Validate validates every object (schema first, then the policy over the whole set) and
// returns the problems in object order.
func (v *Validator) Validate(objs []Object) []Problem {
	var probs []Problem
	var set []decoded
	for _, o := range objs {
		report := func(c Check, detail string) {
			probs = append(probs, Problem{Check: c, Kind: o.GVK.Kind, Namespace: o.Namespace, Name: o.Name, Detail: detail})
		}
		d := decoded{Object: o}
		if cv, ok := v.CRDs[o.GVK]; ok {
			errs := cv.validate(o.JSON)
			for _, e := range errs {
				report(CheckSchema, e)
			}
			if len(errs) == 0 {
				typed, err := decodeCustom(o)
				if err != nil {
					report(CheckSchema, err.Error())
				}
				d.typed = typed
			}
		} else {
			typed, known, errs := decodeCore(o)
			if !known {
				report(CheckKind, unknownKind(o.GVK))
			}
			for _, e := range errs {
				report(CheckSchema, e)
			}
			d.typed = typed
		}
		set = append(set, d)
	}
	p := policy{v: v, objs: set}
	probs = append(probs, p.check()...)
	slices.SortStableFunc(probs, func(a, b Problem) int { return indexOf(objs, a) - indexOf(objs, b) })
	return probs
}

// indexOf orders a problem by its object's position in the render output; problems about
// no rendered object (a service without a Deployment) come last.
func indexOf(objs []Object, p Problem) int {
	for i, o := range objs {
		if o.GVK.Kind == p.Kind && o.Namespace == p.Namespace && o.Name == p.Name {
			return i
		}
	}
	return len(objs)
}

// Problems formats problems one a line, for a test failure.
func Problems(probs []Problem) string {
	var b strings.Builder
	for _, p := range probs {
		b.WriteString(p.String())
		b.WriteString("\n")
	}
	return b.String()
}

var gatewayGroup = schema.GroupVersion{Group: "gateway.networking.k8s.io", Version: "v1"}
