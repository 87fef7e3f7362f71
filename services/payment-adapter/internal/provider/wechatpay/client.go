package wechatpay

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// maxResponse bounds what is read of an API response; WeChat Pay's are a few kilobytes.
const maxResponse = 1 << 20

// APIError is WeChat Pay's answer to a request it did not carry out: the HTTP status and the
// body's {"code","message"}. Only signed answers become an APIError.
type APIError struct {
	Status  int
	Code    string // PARAM_ERROR, RESOURCE_NOT_EXISTS, SYSTEM_ERROR, …
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// refusedRefundCodes are the refund API's answers about the request itself, which no retry
// can change: bad parameters, a request against the business rules (already refunded, more
// than was paid), no such transaction, a buyer account that cannot take the money. Everything
// else is transient: SYSTEM_ERROR, FREQUENCY_LIMITED and 5xx by nature; NOT_ENOUGH (the
// merchant's refundable balance), SIGN_ERROR, NO_AUTH and MCH_NOT_EXISTS because a human can
// fix the account or the configuration and the same out_refund_no then goes through.
var refusedRefundCodes = map[string]bool{
	"PARAM_ERROR":           true,
	"INVALID_REQUEST":       true,
	"RESOURCE_NOT_EXISTS":   true,
	"USER_ACCOUNT_ABNORMAL": true,
}

// refundRequest is the body of POST /v3/refund/domestic/refunds.
type refundRequest struct {
	TransactionID string `json:"transaction_id,omitempty"`
	OutTradeNo    string `json:"out_trade_no,omitempty"`
	OutRefundNo   string `json:"out_refund_no"`
	Reason        string `json:"reason,omitempty"`
	Amount        struct {
		Refund   int64  `json:"refund"`
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

// maxReasonRunes is the refund reason's limit in WeChat Pay (80 characters).
const maxReasonRunes = 80

// Refund implements payment.Refunder: POST /v3/refund/domestic/refunds for the whole of
// r.Amount, the transaction named by r.ProviderTxnID (or r.OrderID as out_trade_no when that
// is empty). WeChat Pay keys the refund on out_refund_no = r.RefundID, so asking again returns
// the same refund. SUCCESS is RefundSucceeded, PROCESSING RefundPending (the REFUND.*
// callback or QueryRefund confirms it), ABNORMAL and CLOSED RefundFailed. The refund callback
// goes to the refund URL configured in the merchant platform (no notify_url is sent).
func (p *Provider) Refund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if r.RefundID == "" || r.Amount <= 0 || r.Currency == "" || (r.ProviderTxnID == "" && r.OrderID == "") {
		return payment.RefundResult{}, fmt.Errorf("wechatpay refund %q: refund id, amount, currency and a transaction id or order id are required", r.RefundID)
	}
	req := refundRequest{TransactionID: r.ProviderTxnID, OutRefundNo: r.RefundID, Reason: truncate(r.Reason, maxReasonRunes)}
	if req.TransactionID == "" {
		req.OutTradeNo = r.OrderID
	}
	req.Amount.Refund, req.Amount.Total, req.Amount.Currency = r.Amount, r.Amount, r.Currency
	var rf refund
	err := p.do(ctx, http.MethodPost, "/v3/refund/domestic/refunds", req, &rf)
	var apiErr *APIError
	if errors.As(err, &apiErr) && refusedRefundCodes[apiErr.Code] {
		return payment.RefundResult{}, fmt.Errorf("wechatpay refund %s: %w: %w", r.RefundID, payment.ErrProviderRefused, err)
	}
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("wechatpay refund %s: %w", r.RefundID, err)
	}
	return refundResult(r.RefundID, rf)
}

// QueryRefund implements payment.Refunder: GET /v3/refund/domestic/refunds/{out_refund_no}.
// 404 RESOURCE_NOT_EXISTS is payment.ErrNotFound.
func (p *Provider) QueryRefund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if r.RefundID == "" {
		return payment.RefundResult{}, errors.New("wechatpay query refund: empty refund id")
	}
	var rf refund
	err := p.do(ctx, http.MethodGet, "/v3/refund/domestic/refunds/"+url.PathEscape(r.RefundID), nil, &rf)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound && apiErr.Code == "RESOURCE_NOT_EXISTS" {
		return payment.RefundResult{}, fmt.Errorf("wechatpay query refund %s: %w: %w", r.RefundID, payment.ErrNotFound, err)
	}
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("wechatpay query refund %s: %w", r.RefundID, err)
	}
	return refundResult(r.RefundID, rf)
}

// refundResult reads the refund API's answer about out_refund_no id.
func refundResult(id string, rf refund) (payment.RefundResult, error) {
	if rf.OutRefundNo != id || rf.RefundID == "" {
		return payment.RefundResult{}, fmt.Errorf("wechatpay refund %s: answer about out_refund_no %q, refund_id %q", id, rf.OutRefundNo, rf.RefundID)
	}
	status, err := refundStatus(rf.Status)
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("wechatpay refund %s: %w", id, err)
	}
	res := payment.RefundResult{ProviderRefundID: rf.RefundID, Status: status}
	if status == payment.RefundFailed {
		res.Reason = rf.Status
	}
	return res, nil
}

// QueryPayment implements payment.Querier: GET /v3/pay/transactions/out-trade-no/{orderID},
// read by the same rules as a TRANSACTION.SUCCESS callback. NOTPAY, USERPAYING and 404
// ORDER_NOT_EXIST are payment.ErrNotFound.
func (p *Provider) QueryPayment(ctx context.Context, orderID string) (payment.Notification, error) {
	if orderID == "" {
		return payment.Notification{}, errors.New("wechatpay query payment: empty order id")
	}
	path := "/v3/pay/transactions/out-trade-no/" + url.PathEscape(orderID) + "?" + url.Values{"mchid": {p.mchID}}.Encode()
	var tx transaction
	err := p.do(ctx, http.MethodGet, path, nil, &tx)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound && (apiErr.Code == "ORDER_NOT_EXIST" || apiErr.Code == "RESOURCE_NOT_EXISTS") {
		return payment.Notification{}, fmt.Errorf("wechatpay query payment %s: %w: %w", orderID, payment.ErrNotFound, err)
	}
	if err != nil {
		return payment.Notification{}, fmt.Errorf("wechatpay query payment %s: %w", orderID, err)
	}
	if tx.OutTradeNo != orderID {
		return payment.Notification{}, fmt.Errorf("wechatpay query payment %s: answer about out_trade_no %q", orderID, tx.OutTradeNo)
	}
	n, err := p.payment(tx)
	if errors.Is(err, errUnpaid) {
		return payment.Notification{}, fmt.Errorf("wechatpay query payment %s: %w: trade_state %s", orderID, payment.ErrNotFound, tx.TradeState)
	}
	if err != nil {
		return payment.Notification{}, fmt.Errorf("wechatpay query payment %s: %w", orderID, err)
	}
	return n, nil
}

// do sends a request signed with the merchant key to pathQuery under the base URL, with in as
// its JSON body (none when nil), verifies the response's signature with the platform key, and
// decodes a 2xx body into out. A signed non-2xx answer is an *APIError. An answer that does
// not verify is an error, whatever its status: a refusal or a "not found" is only believed
// when WeChat Pay signed it.
func (p *Provider) do(ctx context.Context, method, pathQuery string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, p.baseURL+pathQuery, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, pathQuery, err)
	}
	auth, err := p.authorization(method, req.URL.RequestURI(), body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, pathQuery, err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "stockflow-payment-adapter")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, pathQuery, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, pathQuery, err)
	}
	if len(raw) > maxResponse {
		return fmt.Errorf("%s %s: response larger than %d bytes", method, pathQuery, maxResponse)
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if err := p.verifySignature(resp.Header, raw); err != nil {
		if !ok && json.Unmarshal(raw, &e) == nil && e.Code != "" {
			return fmt.Errorf("%s %s: unverified HTTP %d answer (code %s): %w", method, pathQuery, resp.StatusCode, e.Code, err)
		}
		return fmt.Errorf("%s %s: unverified HTTP %d answer: %w", method, pathQuery, resp.StatusCode, err)
	}
	if !ok {
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("%s %s: HTTP %d with an unreadable body: %w", method, pathQuery, resp.StatusCode, err)
		}
		return &APIError{Status: resp.StatusCode, Code: e.Code, Message: e.Message}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode response: %w", method, pathQuery, err)
		}
	}
	return nil
}

// authorization is the Authorization header of a request: the merchant's signature over
// "METHOD\nURI\ntimestamp\nnonce\nbody\n", URI being the path with the query.
func (p *Provider) authorization(method, uri string, body []byte) (string, error) {
	ts := strconv.FormatInt(p.now().Unix(), 10)
	nonce := rand.Text()
	digest := sha256.Sum256(signedMessage(method, uri, ts, nonce, string(body)))
	sig, err := rsa.SignPKCS1v15(nil, p.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("sign request: %w", err)
	}
	return fmt.Sprintf(`WECHATPAY2-SHA256-RSA2048 mchid="%s",nonce_str="%s",signature="%s",timestamp="%s",serial_no="%s"`,
		p.mchID, nonce, base64.StdEncoding.EncodeToString(sig), ts, p.serialNo), nil
}

// truncate returns s cut to at most n runes.
func truncate(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
