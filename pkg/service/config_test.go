package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validated loads a Base from the settings every service needs and name=value (value "" leaves
// name at its default), and validates it.
func validated(t *testing.T, name, value string) (Base, error) {
	t.Helper()
	env := []string{"HTTP_ADDR=:0", "DATABASE_URL=postgres://127.0.0.1/x"}
	if value != "" {
		env = append(env, name+"="+value)
	}
	var b Base
	require.NoError(t, LoadConfig(&b, env))
	return b, b.Validate()
}

func TestClockOffsetShiftsTheClockByAtMostADay(t *testing.T) {
	tests := []struct {
		name   string
		value  string // CLOCK_OFFSET; "" for the default
		offset time.Duration
		ok     bool
	}{
		{"the default leaves the clock alone", "", 0, true},
		{"ahead", "90s", 90 * time.Second, true},
		{"behind", "-5m", -5 * time.Minute, true},
		{"a day ahead", "24h", 24 * time.Hour, true},
		{"a day behind", "-24h", -24 * time.Hour, true},
		{"more than a day ahead", "24h1s", 0, false},
		{"more than a day behind", "-25h", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := validated(t, "CLOCK_OFFSET", tc.value)
			if !tc.ok {
				assert.ErrorContains(t, err, "CLOCK_OFFSET")
				return
			}
			require.NoError(t, err)
			before := time.Now()
			got := b.Clock()()
			after := time.Now()
			assert.Equal(t, time.UTC, got.Location())
			assert.Zero(t, got.Nanosecond()%int(time.Microsecond), "truncated to what PostgreSQL keeps")
			assert.WithinRange(t, got, before.Add(tc.offset).Add(-time.Microsecond), after.Add(tc.offset))
		})
	}
}

// TestRelayBatchFitsThePublishWindow (review F17): the relay publishes a batch at a time, and
// past the window of asynchronous publishes a publish stalls and fails every pass.
func TestRelayBatchFitsThePublishWindow(t *testing.T) {
	_, err := validated(t, "OUTBOX_RELAY_BATCH", "1024")
	require.NoError(t, err)
	_, err = validated(t, "OUTBOX_RELAY_BATCH", "1025")
	assert.ErrorContains(t, err, "OUTBOX_RELAY_BATCH must be between 1 and 1024")
}
