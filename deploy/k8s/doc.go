// Package k8s renders stockflow's kustomize overlays (base/, overlays/dev, overlays/prod) and
// validates every rendered object offline, the way an API server with strict field validation
// and a platform team's admission policy would:
//
//   - core kinds are decoded strictly into the k8s.io/api types (unknown, duplicate and
//     mistyped fields are errors, an unregistered apiVersion/kind is an error);
//   - custom resources (CloudNativePG, Gateway API) are pruned, defaulted and validated against
//     their CRD's structural schema, including its CEL rules;
//   - policy checks: probes, resources, a non-root read-only security context, a PDB and an
//     HPA per Deployment, no admin path on an HTTPRoute, pinned image tags, and a source for
//     every environment variable each service reads.
//
// Validator.Check renders one kustomization and returns every Problem found; the package's
// tests run it over both overlays and over broken kustomizations in testdata/broken.
package k8s
