// Package envtag reads what a configuration struct says about its environment variables in
// its field tags: env (the name), envDefault, secret:"true" and deploy:"unset". It serves
// `<binary> env`, the listing a deployment check holds against the manifests, and a startup
// log with the secrets masked. It imports the standard library only, so a binary with no
// database or broker (the console) lists its settings the way the services do.
package envtag

import (
	"fmt"
	"io"
	"net/url"
	"reflect"
	"strings"
)

// Setting is one field of a configuration struct that an env tag names.
type Setting struct {
	Name       string // the variable: the env tag
	Default    string // the envDefault tag, when HasDefault
	HasDefault bool
	Secret     bool // secret:"true": Shown masks the value
	// Unset is deploy:"unset": a setting for fault injection or a local demonstration that a
	// deployment must leave unset, so it gives it no source.
	Unset bool
	value reflect.Value
}

// Shown is the setting's value as a log may show it: a secret URL keeps its scheme, user,
// host and path and loses its password; any other secret is "xxxxx" ("" stays "").
func (s Setting) Shown() string {
	v := fmt.Sprint(s.value.Interface())
	if s.Secret {
		return mask(v)
	}
	return v
}

// Settings returns the settings of cfg, a struct or a pointer to one (nil: the type's zero
// value), in field order, with the fields of embedded structs in place. Unexported fields and
// fields without an env tag are left out.
func Settings(cfg any) []Setting {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v = reflect.Zero(v.Type().Elem())
			continue
		}
		v = v.Elem()
	}
	var out []Setting
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if f.Anonymous && fv.Kind() == reflect.Struct {
				walk(fv)
				continue
			}
			name := f.Tag.Get("env")
			if name == "" || !f.IsExported() {
				continue
			}
			def, hasDef := f.Tag.Lookup("envDefault")
			out = append(out, Setting{
				Name: name, Default: def, HasDefault: hasDef,
				Secret: f.Tag.Get("secret") == "true", Unset: f.Tag.Get("deploy") == "unset",
				value: fv,
			})
		}
	}
	walk(v)
	return out
}

// Write prints one line per setting of cfg (as Settings lists them): its name, then
// tab-separated "secret" for a secret, "unset" for one a deployment must leave unset and
// "default=<v>" when it has a default. Deployment checks read the first column and "unset".
func Write(w io.Writer, cfg any) error {
	var b strings.Builder
	for _, s := range Settings(cfg) {
		b.WriteString(s.Name)
		if s.Secret {
			b.WriteString("\tsecret")
		}
		if s.Unset {
			b.WriteString("\tunset")
		}
		if s.HasDefault {
			b.WriteString("\tdefault=" + s.Default)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mask(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	if s == "" {
		return ""
	}
	return "xxxxx"
}
