package stock

import (
	"errors"
	"fmt"
	"slices"
)

// ErrUnknownValue is returned for a state or change type outside its closed set: a row written
// by a newer version, or by hand, is refused on load rather than misread.
var ErrUnknownValue = errors.New("value outside its closed set")

// LockStates are every LockState.
var LockStates = []LockState{StateLocked, StateSold, StateReleased, StateShipped, StateRefunded}

// ChangeTypes are every ChangeType.
var ChangeTypes = []ChangeType{ChangeLock, ChangeSell, ChangeReleaseTimeout, ChangeReleaseCancel, ChangeRefundRestock, ChangeShip,
	ChangePurchaseExpected, ChangePurchaseInbound, ChangePurchaseCancelled, ChangeManualAdjust, ChangeStocktake, ChangeRebalance}

// AdjustmentStates are every AdjustmentState.
var AdjustmentStates = []AdjustmentState{AdjustmentPending, AdjustmentApproved, AdjustmentRejected}

// ParseLockState returns s as a LockState, or ErrUnknownValue.
func ParseLockState(s string) (LockState, error) { return parse(LockStates, "lock state", s) }

// ParseChangeType returns s as a ChangeType, or ErrUnknownValue.
func ParseChangeType(s string) (ChangeType, error) { return parse(ChangeTypes, "change type", s) }

// ParseAdjustmentState returns s as an AdjustmentState, or ErrUnknownValue.
func ParseAdjustmentState(s string) (AdjustmentState, error) {
	return parse(AdjustmentStates, "adjustment state", s)
}

func parse[T ~string](set []T, what, s string) (T, error) {
	if !slices.Contains(set, T(s)) {
		return "", fmt.Errorf("%w: %s %q", ErrUnknownValue, what, s)
	}
	return T(s), nil
}
