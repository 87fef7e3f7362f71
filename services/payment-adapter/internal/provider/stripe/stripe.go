// Package stripe is the Stripe payment provider: webhooks signed in Stripe-Signature (HMAC over
// "timestamp.body", 300 s tolerance by default), refunds through POST /v1/refunds with our
// refund id as the Idempotency-Key, and lost callbacks found by a PaymentIntent search on
// metadata['order_id']. It speaks to Stripe through github.com/stripe/stripe-go/v82; stripetest
// is a double of the API it uses.
//
// # What Stripe must be set up with
//
// PaymentIntents are created (by the checkout, not here) with metadata order_id = our order id
// and are captured automatically. The webhook endpoint subscribes to payment_intent.succeeded,
// payment_intent.payment_failed, refund.created, refund.updated and refund.failed (charge.refunded
// is understood too, but see below). Every other event type is acknowledged and ignored
// (ErrIgnoredNotification).
//
// # API versions
//
// Events of any API version are accepted (webhook IgnoreAPIVersionMismatch): the endpoint's
// version is set in Stripe's dashboard and may lag or lead the SDK's (stripego.APIVersion), and
// rejecting a whole event stream over it would stop payments. What makes that safe is that only
// a handful of long-stable fields are read — the event's id and type; the object's id, object,
// amount, amount_received, currency, status, created, metadata, payment_intent,
// last_payment_error, failure_reason and a charge's refunds — and they are checked strictly: a
// missing or mistyped one is ErrMalformedNotification (400, and Stripe retries and warns), so a
// version that moves one of them fails loudly instead of being read as zero.
//
// # Refund notices
//
// The refund.* events carry a Refund object (id, status, payment_intent, metadata with our
// refund_id): they are the refund notices. charge.refunded carries a Charge whose refunds list
// is not included since API version 2022-11-15; when it is there (older endpoints) its refund is
// reported like a refund.* event's, and when it is not the event is ignored, since a refund.*
// event says the same.
//
// # Retries
//
// stripe-go's own retries are off (MaxNetworkRetries 0): every caller of a Refunder or Querier
// already retries transient errors with a backoff (the consumers' NakWithDelay, the
// reconciler's next pass), and two retry layers multiply the delay. A retried refund is safe
// twice over: the Idempotency-Key replays the first answer for 24 hours, and after that Stripe
// answers charge_already_refunded for the whole-amount refund, which Refund turns into the
// refund it finds by metadata.
package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Name is the provider's name in POST /v1/callbacks/stripe.
const Name = "stripe"

// SignatureHeader is the header Stripe signs webhooks in.
const SignatureHeader = "Stripe-Signature"

// Metadata keys this package writes on refunds and reads on PaymentIntents and refunds.
const (
	MetaOrderID   = "order_id"
	MetaRefundID  = "refund_id"
	MetaPaymentID = "payment_id"
	MetaReason    = "reason"
)

// DefaultTolerance is how old a webhook signature may be.
const DefaultTolerance = webhook.DefaultTolerance

// defaultTimeout bounds one API call when Config.HTTPClient is nil (stripe-go's own default is
// 80 s, longer than a consumer's ack wait).
const defaultTimeout = 30 * time.Second

// Config is the Stripe provider's configuration.
type Config struct {
	// APIKey is the secret (sk_…) or restricted (rk_…) key; a restricted key needs write
	// access to refunds and read access to PaymentIntents.
	APIKey string
	// WebhookSecret is the webhook endpoint's signing secret (whsec_…).
	WebhookSecret string
	// APIURL is the API's base URL; "" is Stripe's (https://api.stripe.com). Tests point it at
	// a stripetest.Server.
	APIURL string
	// HTTPClient makes the API calls; nil is a client with a 30 s timeout.
	HTTPClient *http.Client
	// Tolerance is how old a webhook signature may be (and how far in the future); 0 is
	// DefaultTolerance (300 s).
	Tolerance time.Duration
}

// Validate returns an error naming every field of c that is unusable.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.APIKey, "sk_") && !strings.HasPrefix(c.APIKey, "rk_") {
		errs = append(errs, errors.New("api key must be a secret (sk_…) or restricted (rk_…) key"))
	}
	if !strings.HasPrefix(c.WebhookSecret, "whsec_") || len(c.WebhookSecret) == len("whsec_") {
		errs = append(errs, errors.New("webhook secret must be an endpoint signing secret (whsec_…)"))
	}
	if c.APIURL != "" {
		u, err := url.Parse(c.APIURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("api url %q must be an absolute http(s) URL", c.APIURL))
		}
	}
	if c.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("tolerance %s must not be negative", c.Tolerance))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stripe config: %w", err)
	}
	return nil
}

// Provider is the Stripe payment provider. It is safe for concurrent use.
type Provider struct {
	client    *stripego.Client
	secret    string
	tolerance time.Duration
}

var (
	_ payment.Provider = (*Provider)(nil)
	_ payment.Refunder = (*Provider)(nil)
	_ payment.Querier  = (*Provider)(nil)
)

// New returns the Stripe provider configured by c, or the error of c.Validate.
func New(c Config) (*Provider, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: defaultTimeout}
	}
	bc := &stripego.BackendConfig{
		HTTPClient:        c.HTTPClient,
		MaxNetworkRetries: stripego.Int64(0),
		// Errors are returned, and logged by the caller with the order and payment they
		// concern; stripe-go's logger would print them again to stderr without either.
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
	}
	if c.APIURL != "" {
		bc.URL = stripego.String(c.APIURL)
	}
	client := stripego.NewClient(c.APIKey, stripego.WithBackends(stripego.NewBackendsWithConfig(bc)))
	return &Provider{client: client, secret: c.WebhookSecret, tolerance: c.Tolerance}, nil
}

// Name implements payment.Provider.
func (*Provider) Name() string { return Name }

// Verify implements payment.Provider. The signature (and its timestamp, within the tolerance
// either way) is checked by stripe-go's webhook package before the body is interpreted; then
// payment_intent.succeeded and payment_intent.payment_failed become a payment's outcome,
// refund.created, refund.updated, refund.failed and charge.refunded (with its refunds list) a
// refund notice, and every other type ErrIgnoredNotification.
func (p *Provider) Verify(h http.Header, body []byte) (payment.Notification, error) {
	sig := h.Get(SignatureHeader)
	ev, err := webhook.ConstructEventWithOptions(body, sig, p.secret, webhook.ConstructEventOptions{
		Tolerance:                p.tolerance,
		IgnoreAPIVersionMismatch: true,
	})
	switch {
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader),
		errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrTooOld):
		return payment.Notification{}, fmt.Errorf("stripe: %w: %w", payment.ErrInvalidSignature, err)
	case err != nil: // signed, but not an event's JSON
		return payment.Notification{}, fmt.Errorf("stripe: %w: %w", payment.ErrMalformedNotification, err)
	}
	// The webhook package rejects only signatures too old: one from too far in the future
	// could be replayed for longer than the tolerance.
	if at, ok := signedAt(sig); !ok || time.Until(at) > p.tolerance {
		return payment.Notification{}, fmt.Errorf("stripe: %w: signature timestamp in the future", payment.ErrInvalidSignature)
	}
	n, err := p.event(ev)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("stripe event %s (%s): %w", ev.ID, ev.Type, err)
	}
	return n, nil
}

// signedAt returns the t= timestamp of a Stripe-Signature header.
func signedAt(header string) (time.Time, bool) {
	for pair := range strings.SplitSeq(header, ",") {
		if v, ok := strings.CutPrefix(pair, "t="); ok {
			sec, err := strconv.ParseInt(v, 10, 64)
			return time.Unix(sec, 0), err == nil
		}
	}
	return time.Time{}, false
}

// event turns a verified event into a notification.
func (p *Provider) event(ev stripego.Event) (payment.Notification, error) {
	if ev.ID == "" || ev.Type == "" || ev.Data == nil {
		return payment.Notification{}, fmt.Errorf("%w: an event needs id, type and data", payment.ErrMalformedNotification)
	}
	switch ev.Type {
	case stripego.EventTypePaymentIntentSucceeded, stripego.EventTypePaymentIntentPaymentFailed:
		var pi stripego.PaymentIntent
		if err := pi.UnmarshalJSON(ev.Data.Raw); err != nil {
			return payment.Notification{}, fmt.Errorf("%w: payment intent: %w", payment.ErrMalformedNotification, err)
		}
		outcome := payment.OutcomeSucceeded
		if ev.Type == stripego.EventTypePaymentIntentPaymentFailed {
			outcome = payment.OutcomeFailed
		}
		return fromIntent(&pi, outcome, ev.Created)
	case stripego.EventTypeRefundCreated, stripego.EventTypeRefundUpdated, stripego.EventTypeRefundFailed:
		var re stripego.Refund
		if err := re.UnmarshalJSON(ev.Data.Raw); err != nil {
			return payment.Notification{}, fmt.Errorf("%w: refund: %w", payment.ErrMalformedNotification, err)
		}
		return fromRefund(&re, "", "")
	case stripego.EventTypeChargeRefunded:
		var ch stripego.Charge
		if err := ch.UnmarshalJSON(ev.Data.Raw); err != nil {
			return payment.Notification{}, fmt.Errorf("%w: charge: %w", payment.ErrMalformedNotification, err)
		}
		return fromCharge(&ch)
	}
	return payment.Notification{}, fmt.Errorf("%w: event type %s", payment.ErrIgnoredNotification, ev.Type)
}

// fromIntent is the notification of a PaymentIntent with the given outcome, built and checked
// the same way for a webhook's and a search's intent. paidAt (unix seconds) is used when the
// intent's latest charge is not expanded.
func fromIntent(pi *stripego.PaymentIntent, outcome payment.Outcome, paidAt int64) (payment.Notification, error) {
	if pi.Object != "payment_intent" {
		return payment.Notification{}, fmt.Errorf("%w: object %q is not a payment_intent", payment.ErrMalformedNotification, pi.Object)
	}
	orderID, ok := pi.Metadata[MetaOrderID]
	if !ok {
		return payment.Notification{}, fmt.Errorf("%w: payment intent %s has no metadata.%s", payment.ErrMalformedNotification, pi.ID, MetaOrderID)
	}
	switch {
	case outcome == payment.OutcomeSucceeded && pi.Status != stripego.PaymentIntentStatusSucceeded,
		outcome == payment.OutcomeFailed && (pi.Status == "" || pi.Status == stripego.PaymentIntentStatusSucceeded):
		return payment.Notification{}, fmt.Errorf("%w: payment intent %s is %q, not %s", payment.ErrMalformedNotification, pi.ID, pi.Status, outcome)
	}
	n := payment.Notification{
		Provider: Name, ProviderTxnID: pi.ID, OrderID: orderID,
		Amount: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)), Outcome: outcome,
	}
	if outcome == payment.OutcomeSucceeded {
		if pi.AmountReceived > 0 {
			n.Amount = pi.AmountReceived
		}
		if pi.LatestCharge != nil && pi.LatestCharge.Created > 0 {
			paidAt = pi.LatestCharge.Created
		}
		if paidAt > 0 {
			n.PaidAt = time.Unix(paidAt, 0).UTC()
		}
	} else if e := pi.LastPaymentError; e != nil {
		n.Reason = joinNonEmpty(": ", string(e.Code), string(e.DeclineCode), e.Msg)
	}
	if err := n.Validate(); err != nil {
		return payment.Notification{}, err
	}
	return n, nil
}

// fromRefund is the refund notice of re. piID and orderID, when re does not carry them, come
// from the charge it was read from.
func fromRefund(re *stripego.Refund, piID, orderID string) (payment.Notification, error) {
	if re.Object != "refund" || re.ID == "" {
		return payment.Notification{}, fmt.Errorf("%w: object %q is not a refund with an id", payment.ErrMalformedNotification, re.Object)
	}
	if re.PaymentIntent != nil && re.PaymentIntent.ID != "" {
		piID = re.PaymentIntent.ID
	}
	if piID == "" {
		return payment.Notification{}, fmt.Errorf("%w: refund %s has no payment_intent", payment.ErrMalformedNotification, re.ID)
	}
	status, err := refundStatus(re.Status)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("%w: refund %s: %w", payment.ErrMalformedNotification, re.ID, err)
	}
	if id, ok := re.Metadata[MetaOrderID]; ok {
		orderID = id
	}
	n := payment.Notification{
		Provider: Name, ProviderTxnID: piID, OrderID: orderID,
		Refund: &payment.RefundNotice{RefundID: re.Metadata[MetaRefundID], ProviderRefundID: re.ID, Status: status},
	}
	if err := n.Validate(); err != nil {
		return payment.Notification{}, err
	}
	return n, nil
}

// fromCharge is the refund notice of a charge.refunded event: its refund of ours (metadata
// refund_id), or else its latest. Without a refunds list it is ignored (see the package
// comment).
func fromCharge(ch *stripego.Charge) (payment.Notification, error) {
	if ch.Object != "charge" || ch.ID == "" {
		return payment.Notification{}, fmt.Errorf("%w: object %q is not a charge with an id", payment.ErrMalformedNotification, ch.Object)
	}
	if ch.PaymentIntent == nil || ch.PaymentIntent.ID == "" {
		return payment.Notification{}, fmt.Errorf("%w: charge %s has no payment_intent", payment.ErrMalformedNotification, ch.ID)
	}
	if ch.Refunds == nil || len(ch.Refunds.Data) == 0 {
		return payment.Notification{}, fmt.Errorf("%w: charge.refunded without its refunds list: the refund.* events carry the refund", payment.ErrIgnoredNotification)
	}
	re := ch.Refunds.Data[0] // newest first
	for _, r := range ch.Refunds.Data {
		if r != nil && r.Metadata[MetaRefundID] != "" {
			re = r
			break
		}
	}
	if re == nil {
		return payment.Notification{}, fmt.Errorf("%w: charge %s: null refund", payment.ErrMalformedNotification, ch.ID)
	}
	return fromRefund(re, ch.PaymentIntent.ID, ch.Metadata[MetaOrderID])
}

// refundStatus maps a Stripe refund status to ours.
func refundStatus(s stripego.RefundStatus) (payment.RefundStatus, error) {
	switch s {
	case stripego.RefundStatusSucceeded:
		return payment.RefundSucceeded, nil
	case stripego.RefundStatusPending, stripego.RefundStatusRequiresAction:
		return payment.RefundPending, nil
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		return payment.RefundFailed, nil
	}
	return payment.RefundStatus{}, fmt.Errorf("unknown refund status %q", s)
}

// result is what a refund says, in a Refunder's terms.
func result(re *stripego.Refund) (payment.RefundResult, error) {
	status, err := refundStatus(re.Status)
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("refund %s: %w", re.ID, err)
	}
	res := payment.RefundResult{ProviderRefundID: re.ID, Status: status}
	if status == payment.RefundFailed {
		res.Reason = joinNonEmpty(": ", string(re.Status), string(re.FailureReason))
	}
	return res, nil
}

// maxMetadataValue is Stripe's limit on a metadata value's length.
const maxMetadataValue = 500

// Refund implements payment.Refunder: a refund of r.Amount of the PaymentIntent
// r.ProviderTxnID with the Idempotency-Key r.RefundID and our ids in its metadata. An intent
// refunded already (charge_already_refunded) is not an error: the answer is its refund of ours,
// or else (refunded in the dashboard) the refund that paid it back. Errors wrap
// ErrProviderRefused when Stripe says the request can never succeed (see classify); others
// are transient. The same RefundID asked again with other parameters (another reason) is
// answered with the refund asked for first.
func (p *Provider) Refund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if err := checkRefundRequest(r); err != nil {
		return payment.RefundResult{}, err
	}
	params := &stripego.RefundCreateParams{
		PaymentIntent: stripego.String(r.ProviderTxnID),
		Amount:        stripego.Int64(r.Amount),
		Reason:        stripego.String(string(stripego.RefundReasonRequestedByCustomer)),
	}
	for k, v := range map[string]string{MetaRefundID: r.RefundID, MetaPaymentID: r.PaymentID, MetaOrderID: r.OrderID, MetaReason: r.Reason} {
		if v != "" {
			params.AddMetadata(k, truncate(v, maxMetadataValue))
		}
	}
	params.SetIdempotencyKey(r.RefundID)
	re, err := p.client.V1Refunds.Create(ctx, params)
	var se *stripego.Error
	switch {
	case errors.As(err, &se) && se.Code == stripego.ErrorCodeChargeAlreadyRefunded:
		return p.refunded(ctx, r, true)
	case errors.As(err, &se) && se.Type == stripego.ErrorTypeIdempotency:
		// The key was used with other parameters (another reason: RefundPayment and
		// RefundOrder can both reach one payment): the refund asked for first stands.
		return p.refunded(ctx, r, false)
	case err != nil:
		return payment.RefundResult{}, fmt.Errorf("stripe refund %s of %s: %w", r.RefundID, r.ProviderTxnID, classify(err))
	}
	return result(re)
}

// refunded answers a refund Stripe says exists already: ours, found by metadata, or — when
// the whole intent is refunded (whole, since refunds are whole: anyRefund) — the refund that
// paid it back, say one made in the dashboard.
func (p *Provider) refunded(ctx context.Context, r payment.RefundRequest, anyRefund bool) (payment.RefundResult, error) {
	ours, other, err := p.findRefund(ctx, r)
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("stripe refund %s of %s: look up the refund made already: %w", r.RefundID, r.ProviderTxnID, classify(err))
	}
	switch {
	case ours != nil:
		return result(ours)
	case other != nil && anyRefund:
		return result(other)
	}
	return payment.RefundResult{}, fmt.Errorf("stripe refund %s of %s: %w: Stripe says it was asked already, but the intent has no such refund",
		r.RefundID, r.ProviderTxnID, payment.ErrProviderRefused)
}

// QueryRefund implements payment.Refunder: the refund of the PaymentIntent r.ProviderTxnID
// whose metadata refund_id is r.RefundID, or ErrNotFound (also when Stripe has no such
// intent).
func (p *Provider) QueryRefund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if err := checkRefundRequest(r); err != nil {
		return payment.RefundResult{}, err
	}
	ours, _, err := p.findRefund(ctx, r)
	var se *stripego.Error
	if errors.As(err, &se) && se.Code == stripego.ErrorCodeResourceMissing {
		return payment.RefundResult{}, fmt.Errorf("stripe query refund %s: %w: %w", r.RefundID, payment.ErrNotFound, err)
	}
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("stripe query refund %s: %w", r.RefundID, classify(err))
	}
	if ours == nil {
		return payment.RefundResult{}, fmt.Errorf("stripe query refund %s: %w: payment intent %s has no refund with metadata %s=%s",
			r.RefundID, payment.ErrNotFound, r.ProviderTxnID, MetaRefundID, r.RefundID)
	}
	return result(ours)
}

// findRefund lists the refunds of r's PaymentIntent and returns ours (metadata refund_id =
// r.RefundID) and the newest other one that is not failed or canceled.
func (p *Provider) findRefund(ctx context.Context, r payment.RefundRequest) (ours, other *stripego.Refund, err error) {
	params := &stripego.RefundListParams{PaymentIntent: stripego.String(r.ProviderTxnID)}
	params.Limit = stripego.Int64(100)
	for re, err := range p.client.V1Refunds.List(ctx, params) {
		if err != nil {
			return nil, nil, err
		}
		switch {
		case re.Metadata[MetaRefundID] == r.RefundID:
			return re, nil, nil
		case other == nil && re.Status != stripego.RefundStatusFailed && re.Status != stripego.RefundStatusCanceled:
			other = re
		}
	}
	return nil, other, nil
}

func checkRefundRequest(r payment.RefundRequest) error {
	switch {
	case r.RefundID == "" || len(r.RefundID) > 255: // 255: Stripe's limit on an Idempotency-Key
		return fmt.Errorf("stripe refund: refund id %q must be 1-255 bytes", r.RefundID)
	case r.ProviderTxnID == "":
		return fmt.Errorf("stripe refund %s: no payment intent id", r.RefundID)
	case r.Amount <= 0:
		return fmt.Errorf("stripe refund %s: amount %d must be positive", r.RefundID, r.Amount)
	}
	return nil
}

// classify wraps err in ErrProviderRefused when Stripe refused the request for good: a card
// error, or an invalid request (resource_missing, amount_too_large, a refund of an intent that
// did not succeed, …) or an idempotency error answered with 400, 402 or 404. Everything else
// is transient: api_error (5xx), rate_limit and lock_timeout (429), idempotency_key_in_use
// (409), a bad or unauthorised API key (401, 403: fixed by configuration, after which a retry
// succeeds), and network errors.
func classify(err error) error {
	var se *stripego.Error
	if !errors.As(err, &se) {
		return err
	}
	refused := se.Type == stripego.ErrorTypeCard
	if se.Type == stripego.ErrorTypeInvalidRequest || se.Type == stripego.ErrorTypeIdempotency {
		switch se.HTTPStatusCode {
		case http.StatusBadRequest, http.StatusPaymentRequired, http.StatusNotFound:
			refused = true
		}
	}
	if refused {
		return fmt.Errorf("%w: %s %s: %s", payment.ErrProviderRefused, se.Type, se.Code, se.Msg)
	}
	return err
}

// searchableID is what an order id may hold to be put in a search query.
var searchableID = regexp.MustCompile(`^[A-Za-z0-9_:\-]{1,128}$`)

// QueryPayment implements payment.Querier with a PaymentIntent search on metadata['order_id'].
// It returns the oldest succeeded intent of the order as a succeeded notification (checked as
// Verify checks one), or ErrNotFound when there is none: intents still waiting for the buyer
// (requires_payment_method, also after a failed attempt, requires_confirmation,
// requires_action, processing, requires_capture) and canceled ones. Decision: a canceled intent
// took no money, Verify ignores payment_intent.canceled too, and search lags writes (up to a
// minute, in outages an hour) — reporting it failed could fail an order whose newer intent is
// not searchable yet; the order's payment timeout closes an order nobody paid. An order id
// outside [A-Za-z0-9_:-] is refused with an error before any request.
func (p *Provider) QueryPayment(ctx context.Context, orderID string) (payment.Notification, error) {
	if !searchableID.MatchString(orderID) {
		return payment.Notification{}, fmt.Errorf("stripe query payment: order id %q must be 1-128 of [A-Za-z0-9_:-]", orderID)
	}
	params := &stripego.PaymentIntentSearchParams{}
	params.Query = fmt.Sprintf("metadata['%s']:'%s'", MetaOrderID, escapeQuery(orderID))
	params.Limit = stripego.Int64(100)
	params.AddExpand("data.latest_charge")
	var paid *stripego.PaymentIntent
	seen := 0
	for pi, err := range p.client.V1PaymentIntents.Search(ctx, params) {
		if err != nil {
			return payment.Notification{}, fmt.Errorf("stripe query payment of order %s: %w", orderID, classify(err))
		}
		seen++
		switch pi.Status {
		case stripego.PaymentIntentStatusSucceeded:
			if paid == nil || pi.Created < paid.Created {
				paid = pi
			}
		case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusRequiresConfirmation,
			stripego.PaymentIntentStatusRequiresAction, stripego.PaymentIntentStatusProcessing,
			stripego.PaymentIntentStatusRequiresCapture, stripego.PaymentIntentStatusCanceled:
		default:
			return payment.Notification{}, fmt.Errorf("stripe query payment of order %s: intent %s has unknown status %q", orderID, pi.ID, pi.Status)
		}
	}
	if paid == nil {
		return payment.Notification{}, fmt.Errorf("stripe query payment of order %s: %w: %d intents, none succeeded", orderID, payment.ErrNotFound, seen)
	}
	n, err := fromIntent(paid, payment.OutcomeSucceeded, paid.Created)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("stripe query payment of order %s: %w", orderID, err)
	}
	if n.OrderID != orderID {
		return payment.Notification{}, fmt.Errorf("stripe query payment of order %s: %w: search returned intent %s of order %s",
			orderID, payment.ErrMalformedNotification, n.ProviderTxnID, n.OrderID)
	}
	return n, nil
}

// escapeQuery escapes a value for a quoted string of Stripe's search query language. The
// order ids QueryPayment accepts hold neither character; this is the second line of defence.
func escapeQuery(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
