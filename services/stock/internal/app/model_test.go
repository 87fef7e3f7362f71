package app_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
	"github.com/stockflow/stockflow/services/stock/internal/stock"
)

// model is an independent in-memory statement of the rules: what each transition must do to
// the figures, written without the domain's code.
type model struct {
	qty   map[string]*stock.Quantities
	locks map[string]map[string]int64 // order → sku → qty
	state map[string]string           // order → locked | sold | released | shipped | refunded | rejected
}

func (m *model) avail(sku string) int64 { q := m.qty[sku]; return q.OnHand - q.Locked - q.Sold }

// TestModel runs random sequences of every transition — duplicates and out-of-order
// resolutions included — against the real database and the model, and after every step
// checks the figures against the model, the invariants, and verify.
func TestModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runModel(t, seed, 150) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	svc := newService(t)
	r := rand.New(rand.NewPCG(seed, 99))
	skus := []string{"S1", "S2", "S3"}
	m := &model{qty: map[string]*stock.Quantities{}, locks: map[string]map[string]int64{}, state: map[string]string{}}
	for _, s := range skus {
		n := int64(r.IntN(8))
		_, err := svc.CreateSKU(ctx, s, n, "model")
		require.NoError(t, err)
		m.qty[s] = &stock.Quantities{OnHand: n}
	}
	deadline := time.Now().Add(-time.Minute) // passed: timeouts are due
	orders := 0
	pickOrder := func() string {
		if orders == 0 || r.IntN(10) == 0 {
			return "unknown-order"
		}
		return fmt.Sprintf("o%d", r.IntN(orders))
	}
	for step := range steps {
		op := r.IntN(10)
		desc := ""
		switch op {
		case 0, 1, 2: // lock a new order, or replay an old one
			id := fmt.Sprintf("o%d", orders)
			replay := orders > 0 && r.IntN(5) == 0
			if replay {
				id = fmt.Sprintf("o%d", r.IntN(orders))
			}
			var lines []events.Line
			want := map[string]int64{}
			for _, j := range r.Perm(len(skus))[:1+r.IntN(2)] {
				n := int64(1 + r.IntN(3))
				lines = append(lines, line(skus[j], n))
				want[skus[j]] = n
			}
			res, err := svc.LockForOrder(ctx, nil, id, lines, deadline, "model")
			require.NoError(t, err)
			desc = fmt.Sprintf("lock %s %v → locked=%v dup=%v", id, want, res.Locked, res.Duplicate)
			if _, seen := m.state[id]; seen {
				require.True(t, res.Duplicate, desc)
				require.Equal(t, m.state[id] != "rejected", res.Locked, desc)
				break
			}
			require.False(t, res.Duplicate, desc)
			orders++
			fits := true
			for s, n := range want {
				fits = fits && m.avail(s) >= n
			}
			require.Equal(t, fits, res.Locked, desc)
			if fits {
				m.locks[id], m.state[id] = want, "locked"
				for s, n := range want {
					m.qty[s].Locked += n
				}
			} else {
				m.state[id] = "rejected"
			}
		case 3, 4: // sell (payment), possibly late
			id := pickOrder()
			res, err := svc.SellLocked(ctx, nil, id, "pay-"+id, "model")
			desc = fmt.Sprintf("sell %s → %+v %v", id, res, err)
			switch m.state[id] {
			case "":
				require.ErrorIs(t, err, stock.ErrOrderUnknown, desc)
			case "rejected":
				require.NoError(t, err, desc)
				require.Equal(t, stock.SellFailedNoLock, res.Failed, desc)
			case "locked":
				require.NoError(t, err, desc)
				require.True(t, res.Applied, desc)
				for s, n := range m.locks[id] {
					m.qty[s].Locked -= n
					m.qty[s].Sold += n
				}
				m.state[id] = "sold"
			case "released":
				fits := true
				for s, n := range m.locks[id] {
					fits = fits && m.avail(s) >= n
				}
				if !fits {
					require.NoError(t, err, desc)
					require.Equal(t, stock.SellFailedInsufficient, res.Failed, desc)
					break
				}
				require.NoError(t, err, desc)
				require.True(t, res.Applied && res.Relocked, desc)
				for s, n := range m.locks[id] {
					m.qty[s].Sold += n
				}
				m.state[id] = "sold"
			default:
				require.NoError(t, err, desc)
				require.False(t, res.Applied, desc)
			}
		case 5, 6: // release for timeout or cancel
			id := pickOrder()
			reason := stock.ChangeReleaseTimeout
			if r.IntN(2) == 0 {
				reason = stock.ChangeReleaseCancel
			}
			res, err := svc.ReleaseLock(ctx, nil, id, reason, "model")
			desc = fmt.Sprintf("release %s → %+v %v", id, res, err)
			switch m.state[id] {
			case "":
				require.ErrorIs(t, err, stock.ErrOrderUnknown, desc)
			case "rejected":
				require.NoError(t, err, desc)
				require.False(t, res.Applied, desc)
			case "locked":
				require.NoError(t, err, desc)
				require.True(t, res.Applied, desc)
				for s, n := range m.locks[id] {
					m.qty[s].Locked -= n
				}
				m.state[id] = "released"
			default:
				require.NoError(t, err, desc)
				require.False(t, res.Applied, desc)
			}
		case 7: // ship or refund
			id := pickOrder()
			if r.IntN(2) == 0 {
				res, err := svc.ShipOrder(ctx, nil, id, "model")
				desc = fmt.Sprintf("ship %s → %+v %v", id, res, err)
				switch m.state[id] {
				case "", "rejected":
					require.ErrorIs(t, err, stock.ErrNoLock, desc)
				case "sold":
					require.NoError(t, err, desc)
					for s, n := range m.locks[id] {
						m.qty[s].Sold -= n
						m.qty[s].OnHand -= n
					}
					m.state[id] = "shipped"
				case "shipped", "refunded":
					require.NoError(t, err, desc)
					require.False(t, res.Applied, desc)
				default:
					require.ErrorIs(t, err, stock.ErrLockNotHeld, desc)
				}
			} else {
				res, err := svc.RefundOrder(ctx, nil, id, "model")
				desc = fmt.Sprintf("refund %s → %+v %v", id, res, err)
				switch m.state[id] {
				case "", "rejected":
					require.ErrorIs(t, err, stock.ErrNoLock, desc)
				case "sold":
					require.NoError(t, err, desc)
					for s, n := range m.locks[id] {
						m.qty[s].Sold -= n
					}
					m.state[id] = "refunded"
				case "shipped":
					require.NoError(t, err, desc)
					for s, n := range m.locks[id] {
						m.qty[s].OnHand += n
					}
					m.state[id] = "refunded"
				case "refunded":
					require.NoError(t, err, desc)
					require.False(t, res.Applied, desc)
				default:
					require.ErrorIs(t, err, stock.ErrLockNotHeld, desc)
				}
			}
		case 8: // purchase: expect then (maybe partly) receive, keys sometimes replayed
			s := skus[r.IntN(len(skus))]
			n := int64(1 + r.IntN(5))
			key := fmt.Sprintf("po-%d", step)
			_, _, err := svc.ExpectPurchase(ctx, s, stock.MustQty(n), key, "model", "")
			require.NoError(t, err)
			_, dup, err := svc.ExpectPurchase(ctx, s, stock.MustQty(n), key, "model", "")
			require.NoError(t, err)
			require.True(t, dup)
			m.qty[s].Incoming += n
			recv := int64(1 + r.IntN(int(n)+1)) // sometimes one more than incoming
			_, _, err = svc.ReceivePurchase(ctx, s, stock.MustQty(recv), key, "model", "")
			desc = fmt.Sprintf("purchase %s expect %d receive %d → %v", s, n, recv, err)
			if recv > m.qty[s].Incoming {
				require.ErrorIs(t, err, stock.ErrInsufficientStock, desc)
			} else {
				require.NoError(t, err, desc)
				m.qty[s].Incoming -= recv
				m.qty[s].OnHand += recv
			}
		case 9: // an approved manual adjustment or stocktake
			s := skus[r.IntN(len(skus))]
			var a stock.Adjustment
			var err error
			var delta int64
			if r.IntN(2) == 0 {
				d := int64(r.IntN(7) - 3)
				if d == 0 {
					d = 1
				}
				delta = d
				a, err = stock.NewAdjustment(s, stock.ChangeManualAdjust, &d, nil, "model", "alice")
			} else {
				c := int64(r.IntN(10))
				delta = c - m.qty[s].OnHand
				a, err = stock.NewAdjustment(s, stock.ChangeStocktake, nil, &c, "model", "alice")
			}
			require.NoError(t, err)
			a, err = svc.RequestAdjustment(ctx, a)
			require.NoError(t, err)
			_, err = svc.DecideAdjustment(ctx, a.ID, true, "bob")
			desc = fmt.Sprintf("adjust %s by %d → %v", s, delta, err)
			if m.avail(s)+delta < 0 {
				want := stock.ErrInsufficientStock
				if a.Kind == stock.ChangeStocktake {
					want = stock.ErrStocktakeConflict
				}
				require.ErrorIs(t, err, want, desc)
			} else {
				require.NoError(t, err, desc)
				m.qty[s].OnHand += delta
			}
		}
		for _, s := range skus {
			got, err := svc.GetSKU(ctx, s)
			require.NoError(t, err)
			require.Equal(t, *m.qty[s], got.Quantities, "step %d (%s): %s", step, desc, s)
			require.True(t, got.Valid(), "step %d: invariants of %s", step, s)
		}
		diffs, err := svc.Verify(ctx)
		require.NoError(t, err)
		require.Empty(t, diffs, "step %d (%s)", step, desc)
	}
}
