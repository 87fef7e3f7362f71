// Package alipay is the Alipay open-platform provider (RSA2, public-key mode), on the
// standard library only: it verifies Alipay's asynchronous notifications, answers them as
// Alipay expects, and refunds and queries through the gateway (alipay.trade.refund,
// alipay.trade.fastpay.refund.query, alipay.trade.query).
//
// Everything is signed with RSA-SHA256 (PKCS #1 v1.5): notifications and gateway responses by
// Alipay's key, requests by the app's key. A form (a notification, a request) is signed over
// its parameters sorted by name and joined as k=v&k=v, empty values left out; a gateway
// response over the raw JSON text of its *_response object.
package alipay

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Name is the provider's name in POST /v1/callbacks/alipay.
const Name = "alipay"

// DefaultGatewayURL is Alipay's production gateway.
const DefaultGatewayURL = "https://openapi.alipay.com/gateway.do"

// TimeLayout is the layout of Alipay's times (notify_time, gmt_payment, timestamp), which are
// Beijing time.
const TimeLayout = "2006-01-02 15:04:05"

// MaxNotifyAge is how old a notification's notify_time may be: Alipay's retries of one
// notification span about 25 hours (4m, 10m, 10m, 1h, 2h, 6h, 15h).
const MaxNotifyAge = 26 * time.Hour

// Tolerance is how far ahead of our clock a notify_time may be (clock skew).
const Tolerance = 5 * time.Minute

// beijing is China Standard Time. A fixed zone rather than Asia/Shanghai from the tz database:
// China has kept UTC+8 without daylight saving since 1991, and a container may have no tzdata.
var beijing = time.FixedZone("CST", 8*60*60)

// Config is what New needs to know about the app and Alipay.
type Config struct {
	AppID string // the app's id (app_id)
	// AppPrivateKeyPEM is the app's RSA private key, PKCS #8 or PKCS #1, as PEM or as the bare
	// base64 Alipay's key tool writes.
	AppPrivateKeyPEM string
	// AlipayPublicKeyPEM is Alipay's public key for the app (PKIX, as PEM or bare base64): it
	// verifies notifications and responses. Certificate mode is not supported.
	AlipayPublicKeyPEM string
	GatewayURL         string // DefaultGatewayURL when empty
	// SellerID, when set, is the seller (PID, 2088…) every notification must be for.
	SellerID   string
	HTTPClient *http.Client     // a client with a 30 s timeout when nil
	Now        func() time.Time // time.Now when nil
}

// Provider is the Alipay provider.
type Provider struct {
	appID    string
	sellerID string
	key      *rsa.PrivateKey
	alipay   *rsa.PublicKey
	gateway  string
	client   *http.Client
	now      func() time.Time
}

var (
	_ payment.Provider = (*Provider)(nil)
	_ payment.Replier  = (*Provider)(nil)
	_ payment.Refunder = (*Provider)(nil)
	_ payment.Querier  = (*Provider)(nil)
)

// New returns the provider for c. It returns an error naming every field that is missing or
// does not parse; keys must be RSA of at least 2048 bits.
func New(c Config) (*Provider, error) {
	var errs []error
	if c.AppID == "" {
		errs = append(errs, errors.New("AppID is empty"))
	}
	key, err := parsePrivateKey(c.AppPrivateKeyPEM)
	if err != nil {
		errs = append(errs, fmt.Errorf("AppPrivateKeyPEM: %w", err))
	}
	pub, err := parsePublicKey(c.AlipayPublicKeyPEM)
	if err != nil {
		errs = append(errs, fmt.Errorf("AlipayPublicKeyPEM: %w", err))
	}
	gateway := c.GatewayURL
	if gateway == "" {
		gateway = DefaultGatewayURL
	}
	if u, err := url.Parse(gateway); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("GatewayURL %q is not an http(s) URL", gateway))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("alipay config: %w", err)
	}
	p := &Provider{appID: c.AppID, sellerID: c.SellerID, key: key, alipay: pub, gateway: gateway, client: c.HTTPClient, now: c.Now}
	if p.client == nil {
		p.client = &http.Client{Timeout: 30 * time.Second}
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// Name implements payment.Provider.
func (*Provider) Name() string { return Name }

// Verify implements payment.Provider for Alipay's asynchronous notification, a form body.
// The signature is checked first: sign_type RSA2, and sign over the other parameters but
// sign_type (a body that is no form, or repeats a parameter, cannot be verified either). Then
// app_id (and seller_id, when configured) must be ours, else ErrMalformedNotification.
//
// A notification with refund fields (out_biz_no, refund_fee, gmt_refund) confirms the refund
// out_biz_no; otherwise trade_status says: TRADE_SUCCESS and TRADE_FINISHED are a succeeded
// payment, TRADE_CLOSED a failed one (reason "closed"), WAIT_BUYER_PAY is
// ErrIgnoredNotification.
//
// notify_time must be within MaxNotifyAge of now (and at most Tolerance ahead): Alipay retries
// a notification for about 25 hours, each retry with a fresh notify_time under a fresh sign,
// so an older one is a recording, not a retry. Inside the window a replayed notification is
// stopped by the adapter's duplicate detection (one payment per provider transaction).
func (p *Provider) Verify(_ http.Header, body []byte) (payment.Notification, error) {
	f, err := p.verifyForm(body)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("alipay notification: %w", err)
	}
	if err := p.fresh(f["notify_time"]); err != nil {
		return payment.Notification{}, fmt.Errorf("alipay notification: %w", err)
	}
	n, err := p.notification(f)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("alipay notification: %w", err)
	}
	return n, nil
}

// fresh checks a signed notification's notify_time against MaxNotifyAge and Tolerance.
func (p *Provider) fresh(notifyTime string) error {
	at, err := time.ParseInLocation(TimeLayout, notifyTime, beijing)
	if err != nil {
		return fmt.Errorf("%w: notify_time %q is not %s", payment.ErrInvalidSignature, notifyTime, TimeLayout)
	}
	if d := p.now().Sub(at); d > MaxNotifyAge || d < -Tolerance {
		return fmt.Errorf("%w: notify_time %s is %s from now (window %s back, %s ahead)", payment.ErrInvalidSignature,
			notifyTime, d.Round(time.Second), MaxNotifyAge, Tolerance)
	}
	return nil
}

// verifyForm parses a notification body and checks Alipay's signature of it. Its errors wrap
// payment.ErrInvalidSignature.
func (p *Provider) verifyForm(body []byte) (map[string]string, error) {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: not a form: %v", payment.ErrInvalidSignature, err)
	}
	f := make(map[string]string, len(values))
	for k, vs := range values {
		if len(vs) != 1 {
			return nil, fmt.Errorf("%w: parameter %q given %d times", payment.ErrInvalidSignature, k, len(vs))
		}
		f[k] = vs[0]
	}
	if f["sign_type"] != "RSA2" {
		return nil, fmt.Errorf("%w: sign_type %q, not RSA2", payment.ErrInvalidSignature, f["sign_type"])
	}
	sig, err := base64.StdEncoding.DecodeString(f["sign"])
	if err != nil || len(sig) == 0 {
		return nil, fmt.Errorf("%w: sign missing or not base64", payment.ErrInvalidSignature)
	}
	if err := verify(p.alipay, []byte(signContent(f, "sign", "sign_type")), sig); err != nil {
		return nil, fmt.Errorf("%w: sign does not verify with the Alipay public key", payment.ErrInvalidSignature)
	}
	return f, nil
}

// signContent is what a form's signature is over: its parameters but skip, sorted by name,
// as k=v joined by &, empty values left out.
func signContent(f map[string]string, skip ...string) string {
	keys := make([]string, 0, len(f))
	for k, v := range f {
		if v != "" && !contains(skip, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k + "=" + f[k])
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// verify checks an RSA2 signature of msg.
func verify(key *rsa.PublicKey, msg, sig []byte) error {
	digest := sha256.Sum256(msg)
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig)
}

// trade is a payment as Alipay describes it, in a notification or in alipay.trade.query.
type trade struct {
	TradeNo     string
	OutTradeNo  string
	Status      string
	TotalAmount string // yuan
	Currency    string // trans_currency; CNY when empty
	PaidAt      string // gmt_payment, send_pay_date
}

// errUnpaid is a trade still waiting for the buyer.
var errUnpaid = errors.New("trade not paid yet")

// notification interprets a verified notification.
func (p *Provider) notification(f map[string]string) (payment.Notification, error) {
	if f["app_id"] != p.appID {
		return payment.Notification{}, fmt.Errorf("%w: app_id %q, not %q", payment.ErrMalformedNotification, f["app_id"], p.appID)
	}
	if p.sellerID != "" && f["seller_id"] != p.sellerID {
		return payment.Notification{}, fmt.Errorf("%w: seller_id %q, not %q", payment.ErrMalformedNotification, f["seller_id"], p.sellerID)
	}
	if f["out_biz_no"] != "" || f["refund_fee"] != "" || f["gmt_refund"] != "" {
		return refundNotice(f)
	}
	n, err := p.payment(trade{
		TradeNo: f["trade_no"], OutTradeNo: f["out_trade_no"], Status: f["trade_status"],
		TotalAmount: f["total_amount"], Currency: f["trans_currency"], PaidAt: f["gmt_payment"],
	})
	if errors.Is(err, errUnpaid) {
		return payment.Notification{}, fmt.Errorf("%w: trade_status %s", payment.ErrIgnoredNotification, f["trade_status"])
	}
	return n, err
}

// refundNotice reads a refund's notification: Alipay sends one when a refund succeeded, with
// trade_status TRADE_CLOSED after a full refund (TRADE_SUCCESS after a partial one).
func refundNotice(f map[string]string) (payment.Notification, error) {
	switch f["trade_status"] {
	case "TRADE_SUCCESS", "TRADE_CLOSED", "TRADE_FINISHED":
	default:
		return payment.Notification{}, fmt.Errorf("%w: refund notification with trade_status %q", payment.ErrMalformedNotification, f["trade_status"])
	}
	if f["out_biz_no"] == "" {
		return payment.Notification{}, fmt.Errorf("%w: refund notification without out_biz_no", payment.ErrMalformedNotification)
	}
	if fee := f["refund_fee"]; fee != "" {
		if _, err := ParseAmount(fee); err != nil {
			return payment.Notification{}, fmt.Errorf("%w: refund_fee: %w", payment.ErrMalformedNotification, err)
		}
	}
	n := payment.Notification{
		Provider: Name, ProviderTxnID: f["trade_no"], OrderID: f["out_trade_no"],
		Refund: &payment.RefundNotice{
			RefundID: f["out_biz_no"], ProviderRefundID: refundRef(f["trade_no"], f["out_biz_no"]), Status: payment.RefundSucceeded,
		},
	}
	if err := n.Validate(); err != nil {
		return payment.Notification{}, err
	}
	return n, nil
}

// refundRef is our name for an Alipay refund, which has no id of its own: Alipay knows it as
// out_request_no of trade_no.
func refundRef(tradeNo, outRequestNo string) string { return tradeNo + ":" + outRequestNo }

// payment is the Notification for t, a notification's or a query's, validated. It returns
// errUnpaid for WAIT_BUYER_PAY.
func (p *Provider) payment(t trade) (payment.Notification, error) {
	n := payment.Notification{Provider: Name, ProviderTxnID: t.TradeNo, OrderID: t.OutTradeNo, Currency: t.Currency}
	switch t.Status {
	case "TRADE_SUCCESS", "TRADE_FINISHED":
		n.Outcome = payment.OutcomeSucceeded
	case "TRADE_CLOSED":
		n.Outcome, n.Reason = payment.OutcomeFailed, "closed"
	case "WAIT_BUYER_PAY":
		return payment.Notification{}, errUnpaid
	default:
		return payment.Notification{}, fmt.Errorf("%w: trade_status %q", payment.ErrMalformedNotification, t.Status)
	}
	amount, err := ParseAmount(t.TotalAmount)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("%w: total_amount: %w", payment.ErrMalformedNotification, err)
	}
	n.Amount = amount
	if n.Currency == "" {
		n.Currency = "CNY"
	}
	if t.PaidAt != "" {
		at, err := time.ParseInLocation(TimeLayout, t.PaidAt, beijing)
		if err != nil {
			return payment.Notification{}, fmt.Errorf("%w: payment time %q is not %q", payment.ErrMalformedNotification, t.PaidAt, TimeLayout)
		}
		n.PaidAt = at
	}
	if err := n.Validate(); err != nil {
		return payment.Notification{}, err
	}
	return n, nil
}

// maxYuanDigits bounds the integer part of an amount, far beyond any trade and far inside
// int64 fen.
const maxYuanDigits = 15

// ParseAmount returns an Alipay amount in yuan ("12.34", "10.5", "10") as fen, without
// floating point: digits, no sign, no leading zeros, at most two decimals, no exponent or
// spaces.
func ParseAmount(s string) (int64, error) {
	whole, frac, dotted := strings.Cut(s, ".")
	switch {
	case !digits(whole) || len(whole) > maxYuanDigits || (len(whole) > 1 && whole[0] == '0'):
		return 0, fmt.Errorf("amount %q is not yuan", s)
	case dotted && (!digits(frac) || len(frac) > 2):
		return 0, fmt.Errorf("amount %q is not yuan with at most two decimals", s)
	}
	yuan, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	var fen int64
	for i := range 2 {
		fen *= 10
		if i < len(frac) {
			fen += int64(frac[i] - '0')
		}
	}
	return yuan*100 + fen, nil
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// FormatAmount returns fen as Alipay's yuan with two decimals ("12.34").
func FormatAmount(fen int64) string {
	return fmt.Sprintf("%d.%02d", fen/100, fen%100)
}

// Reply implements payment.Replier as Alipay expects: the text "success" for a notification
// that was taken (2xx), "fail" otherwise — anything but "success" makes Alipay retry.
func (*Provider) Reply(status int, _ error) (contentType string, body []byte) {
	if status >= 200 && status < 300 {
		return "text/plain; charset=utf-8", []byte("success")
	}
	return "text/plain; charset=utf-8", []byte("fail")
}
