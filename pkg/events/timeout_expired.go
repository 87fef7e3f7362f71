package events

import (
	"errors"
	"time"
)

// SubjectTimeoutExpired is published by timeout when an order's payment deadline passed.
const SubjectTimeoutExpired = "timeout.expired"

// TimeoutExpired asks stock to release the order's locks if they are still held.
type TimeoutExpired struct {
	OrderID  string    `json:"order_id"`
	Deadline time.Time `json:"deadline"`
}

// Subject implements Event.
func (TimeoutExpired) Subject() string { return SubjectTimeoutExpired }

func (e TimeoutExpired) validate() error {
	if e.Deadline.IsZero() {
		return errors.New("missing deadline")
	}
	return need(map[string]string{"order_id": e.OrderID})
}
