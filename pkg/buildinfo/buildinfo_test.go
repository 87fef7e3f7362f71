package buildinfo_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/buildinfo"
)

// The ldflags the Dockerfiles pass reach Get.
func TestReleaseBuildIsStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "printinfo")
	const pkg = "github.com/stockflow/stockflow/pkg/buildinfo"
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X "+pkg+".version=1.4.0 -X "+pkg+".commit=3f2a9c1", "./testdata/printinfo")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin).Output()
	require.NoError(t, err)
	assert.Equal(t, "1.4.0 (commit 3f2a9c1)", strings.TrimSpace(string(out)))
}

func TestUnstampedBuildIsDev(t *testing.T) {
	assert.Equal(t, "dev", buildinfo.Get().Version)
}
