package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/combine"
	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/pkg/gate"
	"github.com/stockflow/stockflow/pkg/gate/redistest"
	"github.com/stockflow/stockflow/services/stock/internal/app"
	"github.com/stockflow/stockflow/services/stock/internal/postgres"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// gateFixture is a stock service with SKU HOT (units on hand), its gate use cases and the
// gate itself, on a private Redis.
type gateFixture struct {
	svc   *app.Service
	gates *app.Gates
	store *postgres.Store
	gate  *gate.Gate
	redis *redistest.Server
}

func newGateFixture(t *testing.T, units int64, orphanAge time.Duration) gateFixture {
	t.Helper()
	svc, pool := newServiceAndPool(t, combine.Options{})
	_, err := svc.CreateSKU(context.Background(), "HOT", units, "test")
	require.NoError(t, err)
	srv := redistest.Start(t)
	g, err := gate.New(gate.Config{RedisURL: srv.URL, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	store := postgres.NewStore(pool)
	return gateFixture{svc: svc, gates: app.NewGates(store, g, orphanAge), store: store, gate: g, redis: srv}
}

// buy is what order and stock do for one buyer: take at the gate, then lock in the database.
func (f gateFixture) buy(t *testing.T, orderID string, lock bool) gate.Verdict {
	t.Helper()
	v, _ := f.gate.Take(context.Background(), orderID, []gate.Line{{SKU: "HOT", Qty: 1}})
	if v == gate.Admitted && lock {
		res, err := f.svc.LockForOrder(context.Background(), nil, orderID, []events.Line{{SKU: "HOT", Qty: 1}}, time.Now().Add(time.Hour), "test")
		require.NoError(t, err)
		require.True(t, res.Locked)
	}
	return v
}

func TestArmFromTheDatabaseAndDisarm(t *testing.T) {
	f := newGateFixture(t, 10, time.Hour)
	ctx := context.Background()
	_, err := f.gates.Arm(ctx, "NOPE", time.Time{}, "ops")
	assert.ErrorIs(t, err, stock.ErrUnknownSKU)
	_, err = f.gates.Arm(ctx, "bad sku!", time.Time{}, "ops")
	assert.ErrorIs(t, err, stock.ErrBadSKU)

	v, err := f.gates.Arm(ctx, "HOT", time.Time{}, "ops")
	require.NoError(t, err)
	assert.True(t, v.Planned)
	assert.True(t, v.Armed)
	assert.Equal(t, int64(10), v.Remaining)
	assert.Equal(t, "ops", v.ArmedBy)
	assert.Zero(t, v.Drift)

	v, err = f.gates.Disarm(ctx, "HOT")
	require.NoError(t, err)
	assert.False(t, v.Planned)
	assert.False(t, v.Armed)
	assert.Equal(t, gate.Open, f.buy(t, "o1", false))
}

func TestArmLaterIsArmedByTheJobWhenDue(t *testing.T) {
	f := newGateFixture(t, 5, time.Hour)
	ctx := context.Background()
	v, err := f.gates.Arm(ctx, "HOT", time.Now().Add(400*time.Millisecond), "ops")
	require.NoError(t, err)
	assert.True(t, v.Planned)
	assert.False(t, v.Armed, "not before its time")
	checked, _, err := f.gates.Check(ctx, true)
	require.NoError(t, err)
	assert.Zero(t, checked)
	require.Eventually(t, func() bool {
		_, cs, err := f.gates.Check(ctx, true)
		return err == nil && len(cs) == 1 && cs[0].Armed
	}, 5*time.Second, 100*time.Millisecond)
	v, err = f.gates.View(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(5), v.Remaining)
}

// TestCheckAccountsForWhatIsInFlight: takes whose lock has not landed are in flight, not a
// drift; locks landed are the database's; a release not given back is due.
func TestCheckAccountsForWhatIsInFlight(t *testing.T) {
	f := newGateFixture(t, 10, time.Hour)
	ctx := context.Background()
	_, err := f.gates.Arm(ctx, "HOT", time.Time{}, "ops")
	require.NoError(t, err)
	for i := range 3 {
		f.buy(t, fmt.Sprint("locked-", i), true)
	}
	f.buy(t, "in-flight", false)
	f.buy(t, "released", true)
	_, err = f.svc.ReleaseLock(ctx, nil, "released", stock.ChangeReleaseCancel, "test")
	require.NoError(t, err)

	v, err := f.gates.View(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(5), v.Remaining)
	assert.Equal(t, int64(7), v.Available, "10 less the 3 locks held")
	assert.Equal(t, int64(1), v.InFlight)
	assert.Equal(t, int64(1), v.Due)
	assert.Zero(t, v.Drift, "remaining + due = available − in flight: 5 + 1 = 7 − 1")

	_, cs, err := f.gates.Check(ctx, true)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, []string{"released"}, cs[0].Due)
	assert.True(t, cs[0].GaveBack)
	assert.False(t, cs[0].Adjusted)
	v, _ = f.gates.View(ctx, "HOT")
	assert.Equal(t, int64(6), v.Remaining)
	assert.Zero(t, v.Due)
}

// TestRepairAHandBrokenCounter: the counter set by hand to 0 while the database has stock is
// the seed's 有货卖不出; the job sees it twice and sets it from the database.
func TestRepairAHandBrokenCounter(t *testing.T) {
	f := newGateFixture(t, 8, time.Hour)
	ctx := context.Background()
	_, err := f.gates.Arm(ctx, "HOT", time.Time{}, "ops")
	require.NoError(t, err)
	f.buy(t, "a", true)
	_, _, err = f.gate.Adjust(ctx, "HOT", -100)
	require.NoError(t, err)
	assert.Equal(t, gate.SoldOut, f.buy(t, "b", false))

	_, cs, err := f.gates.Check(ctx, false)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, int64(7), cs[0].View.Drift, "check reports")
	v, _ := f.gates.View(ctx, "HOT")
	assert.Zero(t, v.Remaining, "check changes nothing")

	_, cs, err = f.gates.Check(ctx, true)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, int64(7), cs[0].Drift)
	assert.True(t, cs[0].Adjusted)
	v, _ = f.gates.View(ctx, "HOT")
	assert.Equal(t, int64(7), v.Remaining)
	assert.Equal(t, gate.Admitted, f.buy(t, "c", false))
}

// TestRedisLostIsReArmed: Redis restarts empty mid-sale; the job arms the SKU again from the
// database, and an orphaned take (no order ever reached stock) is given back after its age.
func TestRedisLostIsReArmed(t *testing.T) {
	f := newGateFixture(t, 4, 300*time.Millisecond)
	ctx := context.Background()
	_, err := f.gates.Arm(ctx, "HOT", time.Time{}, "ops")
	require.NoError(t, err)
	f.buy(t, "a", true)
	f.buy(t, "orphan", false)
	time.Sleep(400 * time.Millisecond)
	_, cs, err := f.gates.Check(ctx, true)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, []string{"orphan"}, cs[0].Due)

	f.redis.Restart()
	require.Eventually(t, func() bool {
		_, cs, err := f.gates.Check(ctx, true)
		return err == nil && len(cs) == 1 && cs[0].Armed
	}, 10*time.Second, 100*time.Millisecond)
	v, err := f.gates.View(ctx, "HOT")
	require.NoError(t, err)
	assert.Equal(t, int64(3), v.Remaining)
}

func TestUnplannedGateIsDisarmed(t *testing.T) {
	f := newGateFixture(t, 4, time.Hour)
	ctx := context.Background()
	require.NoError(t, f.gate.Arm(ctx, "HOT", 4))
	_, cs, err := f.gates.Check(ctx, false)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.True(t, cs[0].Unplanned)
	assert.False(t, cs[0].Disarmed)
	_, cs, err = f.gates.Check(ctx, true)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.True(t, cs[0].Disarmed)
	assert.Equal(t, gate.Open, f.buy(t, "x", false))
}

// plansThen runs then right after the plans are read: what another replica or an operator
// does while the gate job is between its reads.
type plansThen struct {
	app.GateStore
	then func()
}

func (s plansThen) GatePlans(ctx context.Context) ([]app.GatePlan, error) {
	plans, err := s.GateStore.GatePlans(ctx)
	s.then()
	return plans, err
}

// TestGateArmedDuringACheckStaysArmed: an operator arms a SKU while the gate job runs, just
// after the job read the plans. The job must not take the new gate for one without a plan
// and disarm it: buyers would then go the database path unchecked, and the next run would
// arm it again from the database, blind to the orders in flight (CI's storm: 365 orders
// stored for 200 units).
func TestGateArmedDuringACheckStaysArmed(t *testing.T) {
	f := newGateFixture(t, 4, time.Hour)
	ctx := context.Background()
	job := app.NewGates(plansThen{GateStore: f.store, then: func() {
		_, err := f.gates.Arm(ctx, "HOT", time.Time{}, "ops")
		require.NoError(t, err)
	}}, f.gate, time.Hour)
	_, cs, err := job.Check(ctx, true)
	require.NoError(t, err)
	for _, c := range cs {
		assert.False(t, c.Disarmed, "%s disarmed", c.View.SKU)
	}
	assert.Equal(t, gate.Admitted, f.buy(t, "a", false), "the gate is armed and counts the buyer")
	v, err := f.gates.View(ctx, "HOT")
	require.NoError(t, err)
	assert.True(t, v.Armed)
	assert.Equal(t, int64(3), v.Remaining)
}
