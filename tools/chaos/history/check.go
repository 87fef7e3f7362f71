package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// MaxFailures is how many failed orders a Result describes.
const MaxFailures = 10

// Result is the outcome of Check.
type Result struct {
	OK         bool
	Orders     int // orders checked
	Operations int // operations checked
	Failed     int // orders whose history the model refuses
	// Failures describes the first MaxFailures failed orders, by order id.
	Failures []Failure

	failed []porcupine.Operation // the histories of the described failures
}

// Failure is one order whose history the model refuses.
type Failure struct {
	OrderID string
	// Description lists the order's operations in the order checked, how far they fit the
	// model, and why the next one does not.
	Description string
}

// String summarizes r in a few lines: the verdict and each described failure.
func (r Result) String() string {
	var b strings.Builder
	if r.OK {
		fmt.Fprintf(&b, "history ok: %d orders, %d operations", r.Orders, r.Operations)
		return b.String()
	}
	fmt.Fprintf(&b, "history NOT ok: %d of %d orders fail (%d operations)", r.Failed, r.Orders, r.Operations)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "\n  %s", f.Description)
	}
	if r.Failed > len(r.Failures) {
		fmt.Fprintf(&b, "\n  … and %d more", r.Failed-len(r.Failures))
	}
	return b.String()
}

// WriteVisualization writes porcupine's HTML visualization of the described failures to
// path: one partition per order, with the longest prefix of each that fits the model. It
// writes nothing when r is OK.
func (r Result) WriteVisualization(path string) error {
	if r.OK || len(r.failed) == 0 {
		return nil
	}
	_, info := porcupine.CheckOperationsVerbose(model, r.failed, 0)
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return fmt.Errorf("write visualization %s: %w", path, err)
	}
	return nil
}

// Check checks ops, the operations of any number of orders in any order, against the model
// of one order's locks, each order on its own (a porcupine partition).
//
// The timeline of an order, in porcupine's terms: its stock operations are instants in Seq
// order, one after the other; each client operation spans all of them (its effect reaches
// stock asynchronously, so it may land anywhere among them); the reads come last.
func Check(ops []Op) Result {
	byOrder := make(map[string][]Op)
	for _, op := range ops {
		byOrder[op.OrderID] = append(byOrder[op.OrderID], op)
	}
	ids := slices.Sorted(maps.Keys(byOrder))
	res := Result{Orders: len(ids), Operations: len(ops)}
	timelines := make([][]porcupine.Operation, len(ids))
	var all []porcupine.Operation
	for i, id := range ids {
		timelines[i] = timeline(byOrder[id])
		all = append(all, timelines[i]...)
	}
	if porcupine.CheckOperations(model, all) {
		res.OK = true
		return res
	}
	// Name the orders that failed: check each again, on its own.
	for i, id := range ids {
		if porcupine.CheckOperations(model, timelines[i]) {
			continue
		}
		res.Failed++
		if len(res.Failures) < MaxFailures {
			res.Failures = append(res.Failures, Failure{OrderID: id, Description: describe(id, timelines[i])})
			res.failed = append(res.failed, timelines[i]...)
		}
	}
	res.OK = res.Failed == 0 // the orders together fail only if one fails alone
	return res
}

// meta is an operation's porcupine metadata: its place in its order's timeline, and a note
// on where it came from.
type meta struct {
	index int
	note  string
}

// timeline turns the operations of one order into porcupine operations, in the order their
// times give them (see Check).
func timeline(ops []Op) []porcupine.Operation {
	var stock, client, reads []Op
	for _, op := range ops {
		switch op.Kind {
		case ReadStatus:
			reads = append(reads, op)
		case PayAcked:
			client = append(client, op)
		default:
			stock = append(stock, op)
		}
	}
	slices.SortStableFunc(stock, func(a, b Op) int { return cmp.Compare(a.Seq, b.Seq) })
	out := make([]porcupine.Operation, 0, len(ops))
	add := func(op Op, client int, call, ret int64, note string) {
		out = append(out, porcupine.Operation{ClientId: client, Input: op, Output: op.Status, Call: call, Return: ret,
			Metadata: meta{index: len(out), note: note}})
	}
	end := int64(len(stock)) + 1
	for i, op := range stock {
		add(op, 0, int64(i+1), int64(i+1), fmt.Sprintf("ledger #%d at %s", op.Seq, stamp(op.Call)))
	}
	for i, op := range client {
		add(op, 1+i, 0, end, fmt.Sprintf("client %s – %s", stamp(op.Call), stamp(op.Return)))
	}
	for i, op := range reads {
		add(op, 0, end+1+int64(i), end+1+int64(i), "read at "+stamp(op.Call))
	}
	return out
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("15:04:05.000000")
}

// describe explains why the timeline of one order fails: its operations, the longest prefix
// porcupine could linearize, and the model's reason for refusing the next operation.
func describe(orderID string, ops []porcupine.Operation) string {
	steps := make([]string, len(ops))
	for i, o := range ops {
		steps[i] = describeOp(o.Input.(Op))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "order %s: %s", orderID, strings.Join(steps, " → "))

	_, info := porcupine.CheckOperationsVerbose(model, ops, 0)
	var longest []porcupine.Operation
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, l := range partition {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	st := orderState{}
	done := make([]bool, len(ops))
	for _, o := range longest {
		st, _ = apply(st, o.Input.(Op))
		done[o.Metadata.(meta).index] = true
	}
	if len(longest) > 0 {
		fmt.Fprintf(&b, "; fits up to %s (%s)", describeOp(longest[len(longest)-1].Input.(Op)), st)
	}
	for i, o := range ops { // the first operation, in timeline order, that could not follow
		if done[i] {
			continue
		}
		if _, err := apply(st, o.Input.(Op)); err != nil {
			fmt.Fprintf(&b, "; then %s [%s] is refused: %v", steps[i], o.Metadata.(meta).note, err)
			return b.String()
		}
	}
	b.WriteString("; no order of these operations fits the model")
	return b.String()
}

// describeOp names an operation: "sell CUP-1 (relocked)", "status closed", "payment acked".
func describeOp(op Op) string {
	switch op.Kind {
	case ReadStatus:
		if op.Status == "" {
			return "status (no such order)"
		}
		return "status " + op.Status
	case PayAcked:
		return "payment acked"
	case Sell:
		if op.Relocked {
			return "sell " + op.SKU + " (relocked)"
		}
	}
	return string(op.Kind) + " " + op.SKU
}

// lockState is the state of one (order, SKU) lock in the model; none is the zero value.
type lockState string

const (
	none     lockState = ""
	locked   lockState = "locked"
	sold     lockState = "sold"
	released lockState = "released"
	shipped  lockState = "shipped"
	refunded lockState = "refunded"
)

func (s lockState) String() string {
	if s == none {
		return "none"
	}
	return string(s)
}

// skuLock is the state of an order's lock of one SKU.
type skuLock struct {
	sku   string
	state lockState
}

// orderState is the model's state of one order: its locks, sorted by SKU, and whether a
// payment was acknowledged. It is a value: apply returns a new one and never changes locks in
// place, as porcupine requires.
type orderState struct {
	locks []skuLock
	paid  bool
}

func (s orderState) lock(sku string) lockState {
	if i, ok := slices.BinarySearchFunc(s.locks, sku, func(l skuLock, sku string) int { return cmp.Compare(l.sku, sku) }); ok {
		return s.locks[i].state
	}
	return none
}

func (s orderState) with(sku string, st lockState) orderState {
	locks := slices.Clone(s.locks)
	i, ok := slices.BinarySearchFunc(locks, sku, func(l skuLock, sku string) int { return cmp.Compare(l.sku, sku) })
	if ok {
		locks[i].state = st
	} else {
		locks = slices.Insert(locks, i, skuLock{sku: sku, state: st})
	}
	return orderState{locks: locks, paid: s.paid}
}

func (s orderState) String() string {
	parts := make([]string, 0, len(s.locks)+1)
	for _, l := range s.locks {
		parts = append(parts, l.sku+"="+l.state.String())
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing locked")
	}
	if s.paid {
		parts = append(parts, "payment acked")
	}
	return strings.Join(parts, ", ")
}

func (s orderState) equal(o orderState) bool {
	return s.paid == o.paid && slices.Equal(s.locks, o.locks)
}

// step is a legal move of one lock: from one of these states to another.
type step struct {
	from []lockState
	to   lockState
}

// steps are the moves of a lock (DESIGN §3; services/stock/internal/stock/lock.go). A sell
// that re-locks is its own entry: it must find the lock released, a plain sell held.
var steps = map[Kind]step{
	Lock:           {from: []lockState{none}, to: locked},
	Sell:           {from: []lockState{locked}, to: sold},
	ReleaseTimeout: {from: []lockState{locked}, to: released},
	ReleaseCancel:  {from: []lockState{locked}, to: released},
	Ship:           {from: []lockState{sold}, to: shipped},
	RefundRestock:  {from: []lockState{sold, shipped}, to: refunded},
}

var relockingSell = step{from: []lockState{released}, to: sold}

// agreeing are, for each order status, the states each of the order's locks may be in once
// the run has settled (DESIGN §9; services/order/internal/order/transitions.go). An order
// without locks is in state none. "" is an order the order service does not have: no state
// agrees with it.
var agreeing = map[string][]lockState{
	"pending":          {none},     // order.created not consumed yet: nothing locked
	"awaiting_payment": {locked},   // locked, neither paid nor expired
	"rejected":         {none},     // not enough stock: all lines or none, so none
	"paid":             {sold},     // a payment sold it, maybe after re-locking
	"shipped":          {shipped},  // the order service ships first, stock follows
	"closed":           {released}, // the payment deadline released it
	// cancelled before stock locked it, or released by the cancel
	"cancelled": {released, none},
	// a refund requested of a sale (restock may have happened), or a late payment that found
	// no stock (the lock released, or never taken) waiting for its money to go back
	"refund_pending": {sold, shipped, refunded, released, none},
	"refunded":       {refunded, released, none},
	"":               nil,
}

// paidStatuses are the statuses an order may end in once a payment of it was acknowledged:
// stock sells it, or the money goes back (DESIGN §3: re-lock and sell, otherwise refund).
var paidStatuses = []string{"paid", "shipped", "refund_pending", "refunded"}

// apply is the model's sequential step: the state after op, or why op cannot happen in st.
func apply(st orderState, op Op) (orderState, error) {
	switch op.Kind {
	case PayAcked:
		st.paid = true
		return st, nil
	case ReadStatus:
		return st, agree(st, op.Status)
	}
	s, ok := steps[op.Kind]
	if !ok {
		return st, fmt.Errorf("%q is no step of a lock", op.Kind)
	}
	if op.Kind == Sell && op.Relocked {
		s = relockingSell
	}
	cur := st.lock(op.SKU)
	if !slices.Contains(s.from, cur) {
		return st, fmt.Errorf("it needs %s %s, and it is %s", op.SKU, states(s.from), cur)
	}
	return st.with(op.SKU, s.to), nil
}

// agree reports whether order status agrees with the locks in st.
func agree(st orderState, status string) error {
	ok, known := agreeing[status]
	if !known {
		return fmt.Errorf("unknown order status %q", status)
	}
	if status == "" {
		return fmt.Errorf("the order service has no such order, and stock has %s", st)
	}
	if len(st.locks) == 0 && !slices.Contains(ok, none) {
		return fmt.Errorf("an order %s needs %s, and stock never locked it", status, states(ok))
	}
	for _, l := range st.locks {
		if !slices.Contains(ok, l.state) {
			return fmt.Errorf("an order %s needs %s, and %s is %s", status, states(ok), l.sku, l.state)
		}
	}
	if st.paid && !slices.Contains(paidStatuses, status) {
		return fmt.Errorf("a payment was acknowledged, and the order ended %s (want one of %s)", status, strings.Join(paidStatuses, ", "))
	}
	return nil
}

func states(ss []lockState) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	return strings.Join(names, " or ")
}

// model is the porcupine model of one order: its input is an Op, its output the status a
// read returned ("" for other operations; apply reads it from the Op).
var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		var order []string
		by := make(map[string][]porcupine.Operation)
		for _, o := range history {
			id := o.Input.(Op).OrderID
			if _, ok := by[id]; !ok {
				order = append(order, id)
			}
			by[id] = append(by[id], o)
		}
		out := make([][]porcupine.Operation, len(order))
		for i, id := range order {
			out[i] = by[id]
		}
		return out
	},
	Init: func() any { return orderState{} },
	Step: func(state, input, _ any) (bool, any) {
		next, err := apply(state.(orderState), input.(Op))
		return err == nil, next
	},
	Equal: func(a, b any) bool { return a.(orderState).equal(b.(orderState)) },
	DescribeOperation: func(input, _ any) string {
		return describeOp(input.(Op))
	},
	DescribeState: func(state any) string { return state.(orderState).String() },
	DescribeOperationMetadata: func(m any) string {
		if m, ok := m.(meta); ok {
			return m.note
		}
		return ""
	},
}
