package k8s

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Object is one rendered manifest: its identity and its JSON.
type Object struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	JSON      []byte
}

// Render builds the kustomization in dir with kustomize's default options: files under dir
// only (no remote bases, no load outside the root), no plugins, no network.
func Render(dir string) ([]Object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	var objs []Object
	for _, r := range m.Resources() {
		js, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("render %s: %s %s: %w", dir, r.GetKind(), r.GetName(), err)
		}
		objs = append(objs, Object{
			GVK:       schema.FromAPIVersionAndKind(r.GetApiVersion(), r.GetKind()),
			Namespace: r.GetNamespace(),
			Name:      r.GetName(),
			JSON:      js,
		})
	}
	return objs, nil
}
