package deadline_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/services/timeout/internal/deadline"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func TestExpireOnlyWhenDueAndScheduled(t *testing.T) {
	d, err := deadline.Schedule("ord-1", t0.Add(time.Minute), t0)
	require.NoError(t, err)
	assert.ErrorIs(t, d.Expire(t0.Add(59*time.Second)), deadline.ErrNotDue)
	assert.Equal(t, deadline.Scheduled, d.State())
	require.NoError(t, d.Expire(t0.Add(time.Minute)))
	assert.Equal(t, deadline.Expired, d.State())
	assert.ErrorIs(t, d.Expire(t0.Add(2*time.Minute)), deadline.ErrResolved)
	assert.False(t, d.Cancel(deadline.ResolutionSold, t0.Add(3*time.Minute)), "expiry came first and stands")
	assert.Equal(t, deadline.Expired, d.State())
}

func TestCancelFirstThenExpireIsResolved(t *testing.T) {
	d, err := deadline.Schedule("ord-1", t0.Add(time.Minute), t0)
	require.NoError(t, err)
	assert.True(t, d.Cancel(deadline.ResolutionSold, t0))
	assert.False(t, d.Cancel(deadline.ResolutionReleased, t0))
	assert.ErrorIs(t, d.Expire(t0.Add(time.Hour)), deadline.ErrResolved)
	assert.Equal(t, deadline.ResolutionSold, d.Snapshot().Resolution)
}

func TestCancelledBeforeLockIsFinal(t *testing.T) {
	d, err := deadline.CancelledBeforeLock("ord-1", deadline.ResolutionReleased, t0)
	require.NoError(t, err)
	assert.Equal(t, deadline.Cancelled, d.State())
	assert.True(t, d.At().IsZero())
	assert.ErrorIs(t, d.Expire(t0), deadline.ErrResolved)
}

func TestScheduleAtRoundsUpToTheSecond(t *testing.T) {
	for at, want := range map[time.Time]time.Time{
		t0:                                    t0,
		t0.Add(time.Millisecond):              t0.Add(time.Second),
		t0.Add(999 * time.Millisecond):        t0.Add(time.Second),
		t0.Add(time.Second + time.Nanosecond): t0.Add(2 * time.Second),
	} {
		d, err := deadline.Schedule("o", at, t0)
		require.NoError(t, err)
		assert.Equal(t, want, d.ScheduleAt(), "deadline %s", at.Format(time.RFC3339Nano))
		assert.False(t, d.ScheduleAt().Before(at), "never before the deadline")
	}
}

func TestBadOrderIDs(t *testing.T) {
	for _, id := range []string{"", "a.b", "a b", "a*", "a>", "ü"} {
		_, err := deadline.Schedule(id, t0, t0)
		assert.ErrorIs(t, err, deadline.ErrBadOrderID, "%q", id)
	}
}
