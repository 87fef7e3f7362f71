package k8s

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// coreScheme holds the built-in API groups and versions the manifests may use. Versions not
// listed (autoscaling/v1, policy/v1beta1, …) are unknown on purpose: the manifests pin the
// current ones.
var coreScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, autoscalingv2.AddToScheme,
		policyv1.AddToScheme, networkingv1.AddToScheme, rbacv1.AddToScheme, schedulingv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("k8s: core scheme: %v", err)) // a programming error, caught by every test
		}
	}
	return s
}()

// strictDecoder is the JSON serializer in strict mode: unknown fields, duplicate fields and
// case-insensitive matches are strict decoding errors; a wrong type is a decoding error.
var strictDecoder = json.NewSerializerWithOptions(json.DefaultMetaFactory, coreScheme, coreScheme,
	json.SerializerOptions{Strict: true})

// decodeCore decodes a built-in kind into its k8s.io/api type. known is false when the scheme
// does not have the kind; obj is set (and usable by the policy checks) whenever the JSON
// decoded, even with strict errors.
func decodeCore(o Object) (obj runtime.Object, known bool, errs []string) {
	if !coreScheme.Recognizes(o.GVK) {
		return nil, false, nil
	}
	obj, _, err := strictDecoder.Decode(o.JSON, nil, nil)
	switch {
	case err == nil:
		return obj, true, nil
	case runtime.IsStrictDecodingError(err):
		se, _ := runtime.AsStrictDecodingError(err)
		for _, e := range se.Errors() {
			errs = append(errs, e.Error())
		}
		return obj, true, errs
	default:
		return nil, true, []string{err.Error()}
	}
}

// crdVersion is one served version of a CustomResourceDefinition, ready to validate with.
type crdVersion struct {
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
	cel        *cel.Validator
}

// CRDs is a set of CustomResourceDefinitions objects are validated against, by kind and
// version.
type CRDs map[schema.GroupVersionKind]*crdVersion

// LoadCRDs reads CustomResourceDefinitions from YAML files (several documents a file allowed;
// documents of other kinds are skipped) and adds each served version to the set.
func LoadCRDs(paths ...string) (CRDs, error) {
	set := CRDs{}
	for _, p := range paths {
		if err := set.load(p); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// LoadCRDDir is LoadCRDs over every *.yaml file of dir.
func LoadCRDDir(dir string) (CRDs, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("load CRDs: no *.yaml in %s", dir)
	}
	return LoadCRDs(paths...)
}

// Add adds every CRD of other to the set.
func (set CRDs) Add(other CRDs) {
	for k, v := range other {
		set[k] = v
	}
}

func (set CRDs) load(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load CRDs: %w", err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load CRDs %s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			return fmt.Errorf("load CRDs %s: %w", path, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil {
				continue
			}
			cv, err := newCRDVersion(v.Schema)
			if err != nil {
				return fmt.Errorf("load CRDs %s: %s %s: %w", path, crd.Name, v.Name, err)
			}
			set[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = cv
		}
	}
}

// newCRDVersion prepares a version's schema the way the apiextensions API server does
// (customresource_handler.go): internal conversion, structural schema with defaults pruned,
// the OpenAPI validator and the CEL validator.
func newCRDVersion(v1 *apiextensionsv1.CustomResourceValidation) (*crdVersion, error) {
	var internal apiextensions.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1, &internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema: %w", err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("prune defaults: %w", err)
	}
	validator, _, err := validation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	return &crdVersion{structural: s, validator: validator, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}, nil
}

// validate checks a custom resource as a create with fieldValidation=Strict would: a field the
// schema does not have (pruned, in metadata or in an embedded resource) is an error, then the
// defaulted object is validated against the OpenAPI schema and, if that passes, its CEL rules.
func (cv *crdVersion) validate(js []byte) []string {
	var u map[string]any
	if err := utiljson.Unmarshal(js, &u); err != nil {
		return []string{err.Error()}
	}
	var errs []string
	_, _, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		errs = append(errs, "metadata: "+err.Error())
	}
	unknown := append([]string(nil), metaUnknown...)
	unknown = append(unknown, pruning.PruneWithOptions(u, cv.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u, cv.structural)
	coerceErr, embeddedUnknown := schemaobjectmeta.CoerceWithOptions(nil, u, cv.structural, false,
		schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if coerceErr != nil {
		errs = append(errs, coerceErr.Error())
	}
	unknown = append(unknown, embeddedUnknown...)
	for _, p := range unknown {
		errs = append(errs, fmt.Sprintf("unknown field %q", p))
	}
	structuraldefaulting.Default(u, cv.structural)
	fieldErrs := validation.ValidateCustomResource(nil, u, cv.validator)
	fieldErrs = append(fieldErrs, schemaobjectmeta.Validate(context.Background(), nil, u, cv.structural, true)...)
	if len(fieldErrs) == 0 {
		fieldErrs, _ = cv.cel.Validate(context.Background(), nil, cv.structural, u, nil, celconfig.RuntimeCELCostBudget)
	}
	for _, e := range fieldErrs {
		errs = append(errs, e.Error())
	}
	return errs
}

// unknownKind says why an object's apiVersion/kind is not validated.
func unknownKind(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("unknown apiVersion/kind %s %s: not a built-in kind the validator registers and no CRD loaded for it",
		strings.TrimPrefix(gvk.GroupVersion().String(), "/"), gvk.Kind)
}
