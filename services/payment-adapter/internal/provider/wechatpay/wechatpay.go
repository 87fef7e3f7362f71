// Package wechatpay is the WeChat Pay API v3 provider for a direct merchant (JSAPI and Native
// payments), on the standard library only: it verifies and decrypts WeChat Pay's callbacks,
// answers them as WeChat Pay expects, and refunds and queries through the v3 REST API.
//
// Every message is signed with RSA-SHA256 (PKCS #1 v1.5). Callbacks and API responses carry
// WeChat Pay's signature over "timestamp\nnonce\nbody\n" in the Wechatpay-* headers, made
// with the platform key that Wechatpay-Serial names; requests carry the merchant's signature
// in the Authorization header. A callback's resource is moreover sealed with AES-256-GCM under
// the APIv3 key, so only WeChat Pay and this merchant can read it.
package wechatpay

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// Name is the provider's name in POST /v1/callbacks/wechatpay.
const Name = "wechatpay"

// DefaultBaseURL is WeChat Pay's API v3 endpoint.
const DefaultBaseURL = "https://api.mch.weixin.qq.com"

// Tolerance is how far the timestamp of a signed callback or response may be from now, either
// way, before it is refused as a replay (or a forgery prepared in advance).
const Tolerance = 5 * time.Minute

// The headers of WeChat Pay's signature, on callbacks and on API responses.
const (
	HeaderTimestamp = "Wechatpay-Timestamp" // Unix seconds
	HeaderNonce     = "Wechatpay-Nonce"
	HeaderSignature = "Wechatpay-Signature" // base64
	HeaderSerial    = "Wechatpay-Serial"    // the platform certificate's serial, or a public-key id PUB_KEY_ID_…
)

// Config is what New needs to know about the merchant and WeChat Pay.
type Config struct {
	MchID string // the merchant id (mchid)
	AppID string // the app id payments are made under (appid)
	// MerchantSerialNo is the serial number of the merchant's API certificate, sent with every
	// request so WeChat Pay knows which merchant key signed it.
	MerchantSerialNo string
	// MerchantPrivateKeyPEM is the merchant's RSA private key (apiclient_key.pem: PKCS #8, or
	// PKCS #1).
	MerchantPrivateKeyPEM string
	// APIv3Key is the 32-byte key set in the merchant platform; callbacks are encrypted with it.
	APIv3Key string
	// PlatformPublicKeys holds WeChat Pay's verification keys by the Wechatpay-Serial they come
	// with: a platform certificate's serial number → the certificate's PEM, or a public-key id
	// "PUB_KEY_ID_…" → the PEM of a PKIX or PKCS #1 public key. More than one key lets a
	// rotation overlap.
	PlatformPublicKeys map[string]string
	BaseURL            string           // DefaultBaseURL when empty
	HTTPClient         *http.Client     // a client with a 30 s timeout when nil
	Now                func() time.Time // time.Now when nil
}

// Provider is the WeChat Pay API v3 provider.
type Provider struct {
	mchID, appID string
	serialNo     string
	key          *rsa.PrivateKey
	aead         cipher.AEAD
	platform     map[string]*rsa.PublicKey
	baseURL      string
	client       *http.Client
	now          func() time.Time
}

var (
	_ payment.Provider = (*Provider)(nil)
	_ payment.Replier  = (*Provider)(nil)
	_ payment.Refunder = (*Provider)(nil)
	_ payment.Querier  = (*Provider)(nil)
)

// New returns the provider for c. It returns an error naming every field that is missing or
// does not parse: the APIv3 key must be exactly 32 bytes, the keys must be RSA of at least
// 2048 bits, a certificate's serial number must be the serial it is filed under, and there
// must be at least one platform key.
func New(c Config) (*Provider, error) {
	var errs []error
	for _, f := range []struct{ name, v string }{{"MchID", c.MchID}, {"AppID", c.AppID}, {"MerchantSerialNo", c.MerchantSerialNo}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is empty", f.name))
		}
	}
	key, err := parsePrivateKey(c.MerchantPrivateKeyPEM)
	if err != nil {
		errs = append(errs, fmt.Errorf("MerchantPrivateKeyPEM: %w", err))
	}
	var aead cipher.AEAD
	if len(c.APIv3Key) != 32 {
		errs = append(errs, fmt.Errorf("APIv3Key is %d bytes, not 32", len(c.APIv3Key)))
	} else if aead, err = newGCM([]byte(c.APIv3Key)); err != nil {
		errs = append(errs, fmt.Errorf("APIv3Key: %w", err))
	}
	if len(c.PlatformPublicKeys) == 0 {
		errs = append(errs, errors.New("PlatformPublicKeys is empty: at least one platform certificate or public key is needed"))
	}
	platform := make(map[string]*rsa.PublicKey, len(c.PlatformPublicKeys))
	for serial, text := range c.PlatformPublicKeys {
		k, err := parsePlatformKey(serial, text)
		if err != nil {
			errs = append(errs, fmt.Errorf("PlatformPublicKeys[%q]: %w", serial, err))
			continue
		}
		platform[serial] = k
	}
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("BaseURL %q is not an http(s) URL", base))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("wechatpay config: %w", err)
	}
	p := &Provider{
		mchID: c.MchID, appID: c.AppID, serialNo: c.MerchantSerialNo, key: key, aead: aead,
		platform: platform, baseURL: strings.TrimRight(base, "/"), client: c.HTTPClient, now: c.Now,
	}
	if p.client == nil {
		p.client = &http.Client{Timeout: 30 * time.Second}
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// newGCM returns AES-256-GCM under key, as callbacks are sealed.
func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Name implements payment.Provider.
func (*Provider) Name() string { return Name }

// Verify implements payment.Provider for a WeChat Pay callback. The signature headers are
// checked first — all four present, a known serial, a timestamp within Tolerance of now, a
// signature over "timestamp\nnonce\nbody\n" that verifies — then the resource is decrypted
// (a resource that does not open under the APIv3 key is ErrInvalidSignature too: its sender
// does not know the key). TRANSACTION.SUCCESS is a payment's outcome, REFUND.SUCCESS,
// REFUND.ABNORMAL and REFUND.CLOSED a refund's; any other event type is
// ErrIgnoredNotification, and so is a transaction still waiting for the buyer (NOTPAY,
// USERPAYING), which WeChat Pay does not send. A resource of another mchid or appid is
// ErrMalformedNotification.
func (p *Provider) Verify(h http.Header, body []byte) (payment.Notification, error) {
	if err := p.verifySignature(h, body); err != nil {
		return payment.Notification{}, fmt.Errorf("wechatpay notification: %w", err)
	}
	n, err := p.notification(body)
	if err != nil {
		return payment.Notification{}, fmt.Errorf("wechatpay notification: %w", err)
	}
	return n, nil
}

// verifySignature checks WeChat Pay's signature of body in h, on a callback or a response. Its
// errors wrap payment.ErrInvalidSignature.
func (p *Provider) verifySignature(h http.Header, body []byte) error {
	ts, nonce, sig64, serial := h.Get(HeaderTimestamp), h.Get(HeaderNonce), h.Get(HeaderSignature), h.Get(HeaderSerial)
	if ts == "" || nonce == "" || sig64 == "" || serial == "" {
		return fmt.Errorf("%w: %s, %s, %s and %s are all required", payment.ErrInvalidSignature,
			HeaderTimestamp, HeaderNonce, HeaderSignature, HeaderSerial)
	}
	key, ok := p.platform[serial]
	if !ok {
		return fmt.Errorf("%w: no platform key for %s %q", payment.ErrInvalidSignature, HeaderSerial, serial)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not Unix seconds", payment.ErrInvalidSignature, HeaderTimestamp, ts)
	}
	if d := p.now().Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now (tolerance %s)", payment.ErrInvalidSignature,
			time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), Tolerance)
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil {
		return fmt.Errorf("%w: %s is not base64", payment.ErrInvalidSignature, HeaderSignature)
	}
	digest := sha256.Sum256(signedMessage(ts, nonce, string(body)))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("%w: signature does not verify under platform key %s", payment.ErrInvalidSignature, serial)
	}
	return nil
}

// signedMessage is what WeChat Pay signatures are over: every part followed by a newline.
func signedMessage(parts ...string) []byte {
	var b strings.Builder
	for _, s := range parts {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// envelope is a callback's body; resource is sealed.
type envelope struct {
	ID           string    `json:"id"`
	CreateTime   string    `json:"create_time"`
	EventType    string    `json:"event_type"`
	ResourceType string    `json:"resource_type"`
	Resource     *resource `json:"resource"`
	Summary      string    `json:"summary"`
}

type resource struct {
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"` // base64 of the ciphertext and the 16-byte tag
	Nonce          string `json:"nonce"`
	AssociatedData string `json:"associated_data"`
	OriginalType   string `json:"original_type"`
}

// transaction is a payment as WeChat Pay describes it: in a TRANSACTION.SUCCESS callback and
// in the answer to a query.
type transaction struct {
	MchID          string `json:"mchid"`
	AppID          string `json:"appid"`
	OutTradeNo     string `json:"out_trade_no"`
	TransactionID  string `json:"transaction_id"`
	TradeState     string `json:"trade_state"`
	TradeStateDesc string `json:"trade_state_desc"`
	SuccessTime    string `json:"success_time"`
	Amount         struct {
		Total    int64  `json:"total"` // fen
		Currency string `json:"currency"`
	} `json:"amount"`
}

// refund is a refund as WeChat Pay describes it: in a REFUND.* callback (refund_status) and in
// the answers of the refund API (status).
type refund struct {
	MchID         string `json:"mchid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	OutRefundNo   string `json:"out_refund_no"`
	RefundID      string `json:"refund_id"`
	RefundStatus  string `json:"refund_status"`
	Status        string `json:"status"`
}

// errUnpaid is a transaction that is still waiting for the buyer.
var errUnpaid = errors.New("transaction not paid yet")

// notification interprets an authenticated callback body.
func (p *Provider) notification(body []byte) (payment.Notification, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return payment.Notification{}, fmt.Errorf("%w: %v", payment.ErrMalformedNotification, err)
	}
	switch env.EventType {
	case "TRANSACTION.SUCCESS":
		var tx transaction
		if err := p.open(env.Resource, &tx); err != nil {
			return payment.Notification{}, err
		}
		n, err := p.payment(tx)
		if errors.Is(err, errUnpaid) {
			return payment.Notification{}, fmt.Errorf("%w: %s with trade_state %s", payment.ErrIgnoredNotification, env.EventType, tx.TradeState)
		}
		return n, err
	case "REFUND.SUCCESS", "REFUND.ABNORMAL", "REFUND.CLOSED":
		var rf refund
		if err := p.open(env.Resource, &rf); err != nil {
			return payment.Notification{}, err
		}
		if rf.MchID != p.mchID {
			return payment.Notification{}, fmt.Errorf("%w: refund of mchid %q, not %q", payment.ErrMalformedNotification, rf.MchID, p.mchID)
		}
		if env.EventType != "REFUND."+rf.RefundStatus {
			return payment.Notification{}, fmt.Errorf("%w: %s with refund_status %q", payment.ErrMalformedNotification, env.EventType, rf.RefundStatus)
		}
		status, err := refundStatus(rf.RefundStatus)
		if err != nil {
			return payment.Notification{}, fmt.Errorf("%w: %w", payment.ErrMalformedNotification, err)
		}
		n := payment.Notification{
			Provider: Name, ProviderTxnID: rf.TransactionID, OrderID: rf.OutTradeNo,
			Refund: &payment.RefundNotice{RefundID: rf.OutRefundNo, ProviderRefundID: rf.RefundID, Status: status},
		}
		if err := n.Validate(); err != nil {
			return payment.Notification{}, err
		}
		return n, nil
	}
	return payment.Notification{}, fmt.Errorf("%w: event_type %q", payment.ErrIgnoredNotification, env.EventType)
}

// open decrypts r into v. A resource that does not open is ErrInvalidSignature; one that opens
// but does not decode into v is ErrMalformedNotification.
func (p *Provider) open(r *resource, v any) error {
	if r == nil {
		return fmt.Errorf("%w: no resource", payment.ErrMalformedNotification)
	}
	if r.Algorithm != "AEAD_AES_256_GCM" {
		return fmt.Errorf("%w: resource algorithm %q", payment.ErrMalformedNotification, r.Algorithm)
	}
	sealed, err := base64.StdEncoding.DecodeString(r.Ciphertext)
	if err != nil {
		return fmt.Errorf("%w: resource ciphertext is not base64", payment.ErrInvalidSignature)
	}
	if len(r.Nonce) != p.aead.NonceSize() {
		return fmt.Errorf("%w: resource nonce is %d bytes, not %d", payment.ErrInvalidSignature, len(r.Nonce), p.aead.NonceSize())
	}
	plain, err := p.aead.Open(nil, []byte(r.Nonce), sealed, []byte(r.AssociatedData))
	if err != nil {
		return fmt.Errorf("%w: resource does not decrypt under the APIv3 key", payment.ErrInvalidSignature)
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return fmt.Errorf("%w: decrypted resource: %v", payment.ErrMalformedNotification, err)
	}
	return nil
}

// payment is the Notification for tx, a callback's or a query's, validated. SUCCESS is a
// succeeded payment, and so is REFUND (paid, then refunded); PAYERROR, CLOSED and REVOKED are
// failed ones, with the state as the reason. A failed transaction WeChat Pay gave no
// transaction_id (an order closed unpaid) is named "out_trade_no:<out_trade_no>", so the
// same answer is the same payment every time. NOTPAY and USERPAYING return errUnpaid.
func (p *Provider) payment(tx transaction) (payment.Notification, error) {
	if tx.MchID != p.mchID || tx.AppID != p.appID {
		return payment.Notification{}, fmt.Errorf("%w: transaction of mchid %q appid %q, not %q %q",
			payment.ErrMalformedNotification, tx.MchID, tx.AppID, p.mchID, p.appID)
	}
	n := payment.Notification{
		Provider: Name, ProviderTxnID: tx.TransactionID, OrderID: tx.OutTradeNo,
		Amount: tx.Amount.Total, Currency: tx.Amount.Currency,
	}
	switch tx.TradeState {
	case "SUCCESS", "REFUND":
		n.Outcome = payment.OutcomeSucceeded
	case "PAYERROR", "CLOSED", "REVOKED":
		n.Outcome, n.Reason = payment.OutcomeFailed, tx.TradeState
		if n.ProviderTxnID == "" {
			n.ProviderTxnID = "out_trade_no:" + tx.OutTradeNo
		}
	case "NOTPAY", "USERPAYING":
		return payment.Notification{}, errUnpaid
	default:
		return payment.Notification{}, fmt.Errorf("%w: trade_state %q", payment.ErrMalformedNotification, tx.TradeState)
	}
	if tx.SuccessTime != "" {
		at, err := time.Parse(time.RFC3339, tx.SuccessTime)
		if err != nil {
			return payment.Notification{}, fmt.Errorf("%w: success_time %q is not RFC 3339", payment.ErrMalformedNotification, tx.SuccessTime)
		}
		n.PaidAt = at
	}
	if err := n.Validate(); err != nil {
		return payment.Notification{}, err
	}
	return n, nil
}

// refundStatus maps WeChat Pay's refund status.
func refundStatus(s string) (payment.RefundStatus, error) {
	switch s {
	case "SUCCESS":
		return payment.RefundSucceeded, nil
	case "PROCESSING":
		return payment.RefundPending, nil
	case "ABNORMAL", "CLOSED":
		return payment.RefundFailed, nil
	}
	return payment.RefundStatus{}, fmt.Errorf("refund status %q", s)
}

// Reply implements payment.Replier as WeChat Pay API v3 expects: a callback that was taken
// (2xx) gets no body, with the adapter's status; any other gets {"code":"FAIL","message":…},
// and WeChat Pay retries it. The message names the error's kind only, never its details.
func (*Provider) Reply(status int, err error) (contentType string, body []byte) {
	if status >= 200 && status < 300 {
		return "", nil
	}
	msg := http.StatusText(status)
	for _, kind := range []error{payment.ErrInvalidSignature, payment.ErrMalformedNotification, payment.ErrOrderUnknown} {
		if errors.Is(err, kind) {
			msg = kind.Error()
			break
		}
	}
	if msg == "" {
		msg = "failed"
	}
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{"FAIL", msg})
	return "application/json", b
}
