package envtag_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/envtag"
)

type shared struct {
	Addr   string        `env:"HTTP_ADDR"`
	DB     string        `env:"DATABASE_URL" secret:"true"`
	Offset time.Duration `env:"CLOCK_OFFSET" envDefault:"0s" deploy:"unset"`
}

type config struct {
	shared
	Window  time.Duration `env:"THING_WINDOW" envDefault:"30m"`
	Key     string        `env:"THING_KEY" secret:"true"`
	Empty   string        `env:"THING_EMPTY" envDefault:""`
	NoTag   string
	private string `env:"THING_PRIVATE"`
}

// The listing is what `<binary> env` prints and what deploy/k8s reads: one variable a line,
// in field order, embedded structs in place, with its marks.
func TestWriteListsEveryTaggedField(t *testing.T) {
	const want = "HTTP_ADDR\n" +
		"DATABASE_URL\tsecret\n" +
		"CLOCK_OFFSET\tunset\tdefault=0s\n" +
		"THING_WINDOW\tdefault=30m\n" +
		"THING_KEY\tsecret\n" +
		"THING_EMPTY\tdefault=\n"
	for name, cfg := range map[string]any{
		"a value":       config{private: "x"},
		"a pointer":     &config{},
		"a nil pointer": (*config)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, envtag.Write(&out, cfg))
			assert.Equal(t, want, out.String())
		})
	}
}

func TestShownMasksSecrets(t *testing.T) {
	tests := []struct {
		name  string
		db    string
		shown string
	}{
		{"a URL loses its password", "postgres://app:s3cret@db:5432/orders", "postgres://app:xxxxx@db:5432/orders"},
		{"a URL without a password stays", "nats://nats:4222", "nats://nats:4222"},
		{"anything else is masked whole", "s3cret", "xxxxx"},
		{"empty stays empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config{shared: shared{Addr: ":8081", DB: tc.db}, Window: time.Minute}
			shown := map[string]string{}
			for _, s := range envtag.Settings(cfg) {
				shown[s.Name] = s.Shown()
			}
			assert.Equal(t, tc.shown, shown["DATABASE_URL"])
			assert.Equal(t, ":8081", shown["HTTP_ADDR"], "not a secret")
			assert.Equal(t, "1m0s", shown["THING_WINDOW"])
		})
	}
}
