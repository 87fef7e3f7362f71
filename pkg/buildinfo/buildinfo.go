// Package buildinfo is the version and commit a binary was built from. A release build stamps
// them (the Dockerfiles do, from the VERSION and COMMIT build args):
//
//	go build -ldflags "-X github.com/stockflow/stockflow/pkg/buildinfo.version=1.4.0 -X github.com/stockflow/stockflow/pkg/buildinfo.commit=$(git rev-parse HEAD)"
//
// An unstamped build reports version "dev" and the commit the go command recorded from the
// checkout (vcs.revision, "+dirty" when the tree had changes), if any.
package buildinfo

import "runtime/debug"

var version, commit string

// Info is what /healthz and --version show.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
}

// Get returns the stamped version and commit, or what the go command recorded.
func Get() Info {
	info := Info{Version: version, Commit: commit}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = vcsRevision()
	}
	return info
}

func vcsRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}

// String is "1.4.0 (commit 3f2a…)" or "dev".
func (i Info) String() string {
	if i.Commit == "" {
		return i.Version
	}
	return i.Version + " (commit " + i.Commit + ")"
}
