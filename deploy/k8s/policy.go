package k8s

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// cnpgAppSecretKeys are the keys of the <cluster>-app Secret the CloudNativePG operator
// creates for a Cluster's application owner (CloudNativePG docs, "Connecting from an
// application": username, password, dbname, host, port, uri, jdbc-uri, pgpass, fqdn-uri,
// fqdn-jdbc-uri).
var cnpgAppSecretKeys = []string{"username", "password", "dbname", "host", "port", "uri", "jdbc-uri", "pgpass", "fqdn-uri", "fqdn-jdbc-uri"}

// decodeCustom decodes the custom resources the policy reads (HTTPRoute) into their Go types;
// the CRD schema has already validated them.
func decodeCustom(o Object) (runtime.Object, error) {
	if o.GVK.GroupVersion() == gatewayGroup && o.GVK.Kind == "HTTPRoute" {
		var r gatewayv1.HTTPRoute
		if err := json.Unmarshal(o.JSON, &r); err != nil {
			return nil, fmt.Errorf("decode HTTPRoute: %w", err)
		}
		return &r, nil
	}
	return nil, nil
}

// policy runs the checks that need the whole rendered set.
type policy struct {
	v     *Validator
	objs  []decoded
	probs []Problem
}

func (p *policy) report(o decoded, c Check, format string, args ...any) {
	p.probs = append(p.probs, Problem{Check: c, Kind: o.GVK.Kind, Namespace: o.Namespace, Name: o.Name, Detail: fmt.Sprintf(format, args...)})
}

func (p *policy) check() []Problem {
	ran := map[string]bool{}
	undecoded := false // a Deployment the schema check could not decode may run any service
	for _, o := range p.objs {
		if o.typed == nil && o.GVK.Group == "apps" && o.GVK.Kind == "Deployment" {
			undecoded = true
		}
		switch t := o.typed.(type) {
		case *appsv1.Deployment:
			p.podSpec(o, &t.Spec.Template, true, ran)
			p.deploymentCompanions(o, t)
		case *appsv1.StatefulSet:
			p.podSpec(o, &t.Spec.Template, true, ran)
		case *appsv1.DaemonSet:
			p.podSpec(o, &t.Spec.Template, true, ran)
		case *batchv1.Job:
			p.podSpec(o, &t.Spec.Template, false, ran)
		case *batchv1.CronJob:
			p.podSpec(o, &t.Spec.JobTemplate.Spec.Template, false, ran)
		case *corev1.Pod:
			p.podSpec(o, &corev1.PodTemplateSpec{ObjectMeta: t.ObjectMeta, Spec: t.Spec}, true, ran)
		case *gatewayv1.HTTPRoute:
			p.route(o, t)
		}
	}
	for _, svc := range sortedKeys(p.v.Env) {
		if !ran[svc] && !undecoded {
			p.probs = append(p.probs, Problem{Check: CheckEnv, Kind: "Deployment", Name: svc,
				Detail: fmt.Sprintf("no Deployment runs service %s (no container image named …/%s:<tag>)", svc, svc)})
		}
	}
	return p.probs
}

// podSpec checks every container of a pod template. Long-running workloads need readiness
// and liveness probes on their containers and on sidecar init containers (restartPolicy
// Always); a plain init container cannot have them (the API server rejects those fields), so
// it is held to resources, security context, image and environment only.
func (p *policy) podSpec(o decoded, t *corev1.PodTemplateSpec, longRunning bool, ran map[string]bool) {
	type ctr struct {
		c       *corev1.Container
		what    string
		probing bool
	}
	var all []ctr
	for i := range t.Spec.InitContainers {
		c := &t.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		all = append(all, ctr{c, "init container " + c.Name, longRunning && sidecar})
	}
	for i := range t.Spec.Containers {
		c := &t.Spec.Containers[i]
		all = append(all, ctr{c, "container " + c.Name, longRunning})
	}
	for _, x := range all {
		c := x.c
		if x.probing {
			if c.ReadinessProbe == nil {
				p.report(o, CheckProbes, "%s has no readinessProbe", x.what)
			}
			if c.LivenessProbe == nil {
				p.report(o, CheckProbes, "%s has no livenessProbe", x.what)
			}
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[res]; !ok {
				p.report(o, CheckResources, "%s has no %s request", x.what, res)
			}
			if _, ok := c.Resources.Limits[res]; !ok {
				p.report(o, CheckResources, "%s has no %s limit", x.what, res)
			}
		}
		p.security(o, t.Spec.SecurityContext, c, x.what)
		if msg := imageProblem(c.Image); msg != "" {
			p.report(o, CheckImage, "%s: %s", x.what, msg)
		}
		if svc := imageService(c.Image); svc != "" {
			if vars, ok := p.v.Env[svc]; ok {
				if o.GVK.Kind == "Deployment" {
					ran[svc] = true
				}
				p.env(o, c, x.what, svc, vars)
			}
		}
	}
}

// security requires runAsNonRoot (the container's, or the pod's it inherits), a read-only root
// filesystem and no privilege escalation, each set explicitly.
func (p *policy) security(o decoded, pod *corev1.PodSecurityContext, c *corev1.Container, what string) {
	sc := c.SecurityContext
	nonRoot := pod != nil && pod.RunAsNonRoot != nil && *pod.RunAsNonRoot
	if sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		p.report(o, CheckSecurity, "%s does not set runAsNonRoot: true", what)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		p.report(o, CheckSecurity, "%s does not set readOnlyRootFilesystem: true", what)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		p.report(o, CheckSecurity, "%s does not set allowPrivilegeEscalation: false", what)
	}
}

// imageProblem says what is wrong with an image reference: no tag (nor digest), or latest.
func imageProblem(image string) string {
	if image == "" {
		return "no image"
	}
	if strings.Contains(image, "@") {
		return "" // pinned by digest
	}
	tag := imageTag(image)
	switch tag {
	case "":
		return fmt.Sprintf("image %s has no tag", image)
	case "latest":
		return fmt.Sprintf("image %s is tagged latest", image)
	}
	return ""
}

// imageTag is the tag of an image reference: after the last colon of the last path element
// (a registry's port, registry:5000/x, is not a tag).
func imageTag(image string) string {
	last := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:]
	}
	return ""
}

// imageService is the last path element of an image without tag or digest:
// registry.example.com/stockflow/order:0.1.0 runs order.
func imageService(image string) string {
	image, _, _ = strings.Cut(image, "@")
	last := image[strings.LastIndex(image, "/")+1:]
	name, _, _ := strings.Cut(last, ":")
	return name
}

// env requires a source for each variable the service reads: an env entry (a value, even
// empty, or a valueFrom), or a key of an envFrom ConfigMap or Secret. A configMapKeyRef,
// secretKeyRef or envFrom must name an object of the rendered set that has the key, or an
// external Secret (ExternalSecrets, CloudNativePG's <cluster>-app) documented to have it.
// An optional reference whose key is missing is no source.
func (p *policy) env(o decoded, c *corev1.Container, what, svc string, vars []string) {
	have := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			have[e.Name] = true
			continue
		}
		var kind, name, key string
		var optional *bool
		switch ref := e.ValueFrom; {
		case ref.ConfigMapKeyRef != nil:
			kind, name, key, optional = "ConfigMap", ref.ConfigMapKeyRef.Name, ref.ConfigMapKeyRef.Key, ref.ConfigMapKeyRef.Optional
		case ref.SecretKeyRef != nil:
			kind, name, key, optional = "Secret", ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, ref.SecretKeyRef.Optional
		default: // fieldRef, resourceFieldRef, fileKeyRef: filled by the kubelet
			have[e.Name] = true
			continue
		}
		keys, found := p.keys(kind, o.Namespace, name)
		if slices.Contains(keys, key) {
			have[e.Name] = true
		} else if !isOptional(optional) {
			p.report(o, CheckEnv, "%s: %s reads key %q of %s %s, %s", what, e.Name, key, kind, name, missing(found))
		}
	}
	for _, ef := range c.EnvFrom {
		var kind, name string
		var optional *bool
		switch {
		case ef.ConfigMapRef != nil:
			kind, name, optional = "ConfigMap", ef.ConfigMapRef.Name, ef.ConfigMapRef.Optional
		case ef.SecretRef != nil:
			kind, name, optional = "Secret", ef.SecretRef.Name, ef.SecretRef.Optional
		default:
			continue
		}
		keys, found := p.keys(kind, o.Namespace, name)
		if !found && !isOptional(optional) {
			p.report(o, CheckEnv, "%s: envFrom %s %s is not in the manifests nor a known external Secret", what, kind, name)
		}
		for _, k := range keys {
			have[ef.Prefix+k] = true
		}
	}
	for _, name := range vars {
		if !have[name] {
			p.report(o, CheckEnv, "%s: %s reads %s, which has no source (env, or a key of an envFrom ConfigMap/Secret)", what, svc, name)
		}
	}
}

func missing(found bool) string {
	if found {
		return "which has no such key"
	}
	return "which is not in the manifests nor a known external Secret"
}

func isOptional(b *bool) bool { return b != nil && *b }

// keys returns the keys of the ConfigMap or Secret name in namespace ns, and whether it is
// known: rendered, or (Secrets) external.
func (p *policy) keys(kind, ns, name string) ([]string, bool) {
	for _, o := range p.objs {
		if o.GVK.Kind != kind || o.GVK.Group != "" || o.Namespace != ns || o.Name != name {
			continue
		}
		var keys []string
		switch t := o.typed.(type) {
		case *corev1.ConfigMap:
			keys = append(sortedKeys(t.Data), sortedKeys(t.BinaryData)...)
		case *corev1.Secret:
			keys = append(sortedKeys(t.Data), sortedKeys(t.StringData)...)
		}
		return keys, true
	}
	if kind != "Secret" {
		return nil, false
	}
	if keys, ok := p.v.ExternalSecrets[name]; ok {
		return keys, true
	}
	for _, o := range p.objs {
		if o.GVK.Group == "postgresql.cnpg.io" && o.GVK.Kind == "Cluster" && o.Namespace == ns && o.Name+"-app" == name {
			return cnpgAppSecretKeys, true
		}
	}
	return nil, false
}

// deploymentCompanions requires a PodDisruptionBudget selecting the Deployment's pods and a
// HorizontalPodAutoscaler targeting it, both in its namespace.
func (p *policy) deploymentCompanions(o decoded, d *appsv1.Deployment) {
	podLabels := labels.Set(d.Spec.Template.Labels)
	var pdb, hpa bool
	for _, x := range p.objs {
		if x.Namespace != o.Namespace {
			continue
		}
		switch t := x.typed.(type) {
		case *policyv1.PodDisruptionBudget:
			if sel, err := metav1.LabelSelectorAsSelector(t.Spec.Selector); err == nil && t.Spec.Selector != nil && sel.Matches(podLabels) {
				pdb = true
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			ref := t.Spec.ScaleTargetRef
			if ref.Kind == "Deployment" && ref.Name == d.Name && ref.APIVersion == "apps/v1" {
				hpa = true
			}
		}
	}
	if !pdb {
		p.report(o, CheckPDB, "no PodDisruptionBudget selects its pods (%s)", podLabels)
	}
	if !hpa {
		p.report(o, CheckHPA, "no HorizontalPodAutoscaler targets it (scaleTargetRef apps/v1 Deployment %s)", d.Name)
	}
}

// route reports every match of an HTTPRoute that admits an admin path, and every URL rewrite
// onto one. A rule without matches, or a match without a path, is PathPrefix / (Gateway API
// defaults), which admits everything.
func (p *policy) route(o decoded, r *gatewayv1.HTTPRoute) {
	admin := p.v.AdminPaths
	if admin == nil {
		admin = DefaultAdminPaths
	}
	for i, rule := range r.Spec.Rules {
		ruleName := fmt.Sprintf("rule %d", i)
		if rule.Name != nil {
			ruleName = fmt.Sprintf("rule %s", *rule.Name)
		}
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		for _, m := range matches {
			typ, value := gatewayv1.PathMatchPathPrefix, "/"
			if m.Path != nil {
				if m.Path.Type != nil {
					typ = *m.Path.Type
				}
				if m.Path.Value != nil {
					value = *m.Path.Value
				}
			}
			if a := admits(typ, value, admin); a != "" {
				p.report(o, CheckRoute, "%s: path %s %s admits %s", ruleName, typ, value, a)
			}
		}
		for _, f := range rule.Filters {
			if f.URLRewrite == nil || f.URLRewrite.Path == nil {
				continue
			}
			for _, to := range []*string{f.URLRewrite.Path.ReplaceFullPath, f.URLRewrite.Path.ReplacePrefixMatch} {
				if to != nil && underAny(*to, admin) != "" {
					p.report(o, CheckRoute, "%s: rewrites to %s, under %s", ruleName, *to, underAny(*to, admin))
				}
			}
		}
	}
}

// admits returns the admin path a path match lets through, or "". Prefix matching is by whole
// path elements, as Gateway API specifies: /v1 admits /v1/admin, /v1/ad does not.
func admits(typ gatewayv1.PathMatchType, value string, admin []string) string {
	switch typ {
	case gatewayv1.PathMatchExact:
		return underAny(value, admin)
	case gatewayv1.PathMatchRegularExpression:
		re, err := regexp.Compile(value)
		if err != nil {
			return "anything (the expression does not compile as Go RE2: " + err.Error() + ")"
		}
		for _, a := range admin {
			if re.MatchString(a) || re.MatchString(a+"/x") {
				return a
			}
		}
		return ""
	default: // PathPrefix
		if a := underAny(value, admin); a != "" {
			return a
		}
		for _, a := range admin {
			if under(a, value) {
				return a
			}
		}
		return ""
	}
}

// underAny returns the admin prefix p is under, or "".
func underAny(p string, admin []string) string {
	for _, a := range admin {
		if under(p, a) {
			return a
		}
	}
	return ""
}

// under reports whether path p is prefix or below it, element-wise (trailing slashes and
// dot segments cleaned, as a proxy normalizes them).
func under(p, prefix string) bool {
	p, prefix = path.Clean("/"+p), path.Clean("/"+prefix)
	return prefix == "/" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
