package alipay

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
)

// maxResponse bounds what is read of a gateway response; Alipay's are a few kilobytes.
const maxResponse = 1 << 20

// APIError is the gateway's signed answer that a call was not carried out: code 10000 is
// success; 20000 (service unavailable), 40001/40002/40006 (missing or invalid parameters,
// permissions) and 40004 (business failure, with the reason in SubCode) are not.
type APIError struct {
	Code    string `json:"code"`
	Msg     string `json:"msg"`
	SubCode string `json:"sub_code"`
	SubMsg  string `json:"sub_msg"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("code %s %s: %s %s", e.Code, e.Msg, e.SubCode, e.SubMsg)
}

// subCode is the error's sub_code without the "aop." prefix the gateway sometimes adds.
func (e *APIError) subCode() string { return strings.TrimPrefix(e.SubCode, "aop.") }

// tradeNotExist reports whether err is Alipay's answer that the trade does not exist.
func tradeNotExist(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == "40004" && e.subCode() == "ACQ.TRADE_NOT_EXIST"
}

// transientRefundSubCodes are the business failures of alipay.trade.refund that a retry with
// the same out_request_no can get past: Alipay's own trouble, and a seller balance too low
// until it is topped up. Every other 40004 (ACQ.TRADE_NOT_EXIST, ACQ.TRADE_STATUS_ERROR,
// ACQ.REFUND_AMT_NOT_EQUAL_TOTAL, ACQ.TRADE_HAS_FINISHED, ACQ.DISCORDANT_REPEAT_REQUEST, …)
// is about the request itself and refused. The other codes (20000; 40001, 40002, 40006: the
// app's parameters, signature or permissions) are transient: a human fixes the configuration
// and the same request then goes through.
var transientRefundSubCodes = map[string]bool{
	"ACQ.SYSTEM_ERROR":              true,
	"ACQ.SELLER_BALANCE_NOT_ENOUGH": true,
}

// maxReasonRunes is refund_reason's limit in Alipay.
const maxReasonRunes = 256

type refundBiz struct {
	TradeNo      string `json:"trade_no,omitempty"`
	OutTradeNo   string `json:"out_trade_no,omitempty"`
	RefundAmount string `json:"refund_amount"`
	OutRequestNo string `json:"out_request_no"`
	RefundReason string `json:"refund_reason,omitempty"`
}

type refundResponse struct {
	TradeNo      string `json:"trade_no"`
	OutTradeNo   string `json:"out_trade_no"`
	FundChange   string `json:"fund_change"`
	RefundFee    string `json:"refund_fee"`
	GmtRefundPay string `json:"gmt_refund_pay"`
}

// Refund implements payment.Refunder: alipay.trade.refund of r.Amount (as yuan) from the trade
// r.ProviderTxnID (trade_no; out_trade_no r.OrderID when that is empty), out_request_no
// r.RefundID. Alipay refunds synchronously and keys the refund on out_request_no: fund_change
// Y is RefundSucceeded; a repeated request answers fund_change N for the refund it already
// made, so N is confirmed with QueryRefund (RefundPending if that does not find it yet).
func (p *Provider) Refund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if r.RefundID == "" || r.Amount <= 0 || (r.ProviderTxnID == "" && r.OrderID == "") {
		return payment.RefundResult{}, fmt.Errorf("alipay refund %q: refund id, amount and a trade no or order id are required", r.RefundID)
	}
	biz := refundBiz{TradeNo: r.ProviderTxnID, RefundAmount: FormatAmount(r.Amount), OutRequestNo: r.RefundID, RefundReason: truncate(r.Reason, maxReasonRunes)}
	if biz.TradeNo == "" {
		biz.OutTradeNo = r.OrderID
	}
	var resp refundResponse
	err := p.call(ctx, "alipay.trade.refund", biz, &resp)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code == "40004" && !transientRefundSubCodes[apiErr.subCode()] {
		return payment.RefundResult{}, fmt.Errorf("alipay refund %s: %w: %w", r.RefundID, payment.ErrProviderRefused, err)
	}
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("alipay refund %s: %w", r.RefundID, err)
	}
	tradeNo := resp.TradeNo
	if tradeNo == "" {
		tradeNo = r.ProviderTxnID
	}
	if resp.FundChange == "Y" {
		return payment.RefundResult{ProviderRefundID: refundRef(tradeNo, r.RefundID), Status: payment.RefundSucceeded}, nil
	}
	q := r
	q.ProviderTxnID = tradeNo
	res, err := p.QueryRefund(ctx, q)
	if errors.Is(err, payment.ErrNotFound) {
		return payment.RefundResult{ProviderRefundID: refundRef(tradeNo, r.RefundID), Status: payment.RefundPending}, nil
	}
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("alipay refund %s: accepted with fund_change %q; confirming it: %w", r.RefundID, resp.FundChange, err)
	}
	return res, nil
}

type refundQueryBiz struct {
	TradeNo      string   `json:"trade_no,omitempty"`
	OutTradeNo   string   `json:"out_trade_no,omitempty"`
	OutRequestNo string   `json:"out_request_no"`
	QueryOptions []string `json:"query_options"`
}

type refundQueryResponse struct {
	TradeNo      string `json:"trade_no"`
	OutTradeNo   string `json:"out_trade_no"`
	OutRequestNo string `json:"out_request_no"`
	RefundAmount string `json:"refund_amount"`
	RefundStatus string `json:"refund_status"`
	GmtRefundPay string `json:"gmt_refund_pay"`
}

// QueryRefund implements payment.Refunder: alipay.trade.fastpay.refund.query of out_request_no
// r.RefundID. refund_status REFUND_SUCCESS (or none, with the refund described: older
// answers) is RefundSucceeded; an answer that describes no refund, or ACQ.TRADE_NOT_EXIST, is
// payment.ErrNotFound.
func (p *Provider) QueryRefund(ctx context.Context, r payment.RefundRequest) (payment.RefundResult, error) {
	if r.RefundID == "" || (r.ProviderTxnID == "" && r.OrderID == "") {
		return payment.RefundResult{}, fmt.Errorf("alipay query refund %q: refund id and a trade no or order id are required", r.RefundID)
	}
	biz := refundQueryBiz{TradeNo: r.ProviderTxnID, OutRequestNo: r.RefundID, QueryOptions: []string{"gmt_refund_pay"}}
	if biz.TradeNo == "" {
		biz.OutTradeNo = r.OrderID
	}
	var resp refundQueryResponse
	err := p.call(ctx, "alipay.trade.fastpay.refund.query", biz, &resp)
	if tradeNotExist(err) {
		return payment.RefundResult{}, fmt.Errorf("alipay query refund %s: %w: %w", r.RefundID, payment.ErrNotFound, err)
	}
	if err != nil {
		return payment.RefundResult{}, fmt.Errorf("alipay query refund %s: %w", r.RefundID, err)
	}
	if resp.OutRequestNo == "" && resp.RefundAmount == "" {
		return payment.RefundResult{}, fmt.Errorf("alipay query refund %s: %w: Alipay has no such refund", r.RefundID, payment.ErrNotFound)
	}
	if resp.OutRequestNo != "" && resp.OutRequestNo != r.RefundID {
		return payment.RefundResult{}, fmt.Errorf("alipay query refund %s: answer about out_request_no %q", r.RefundID, resp.OutRequestNo)
	}
	if resp.RefundStatus != "" && resp.RefundStatus != "REFUND_SUCCESS" {
		return payment.RefundResult{}, fmt.Errorf("alipay query refund %s: refund_status %q", r.RefundID, resp.RefundStatus)
	}
	tradeNo := resp.TradeNo
	if tradeNo == "" {
		tradeNo = r.ProviderTxnID
	}
	return payment.RefundResult{ProviderRefundID: refundRef(tradeNo, r.RefundID), Status: payment.RefundSucceeded}, nil
}

type tradeQueryResponse struct {
	TradeNo       string `json:"trade_no"`
	OutTradeNo    string `json:"out_trade_no"`
	TradeStatus   string `json:"trade_status"`
	TotalAmount   string `json:"total_amount"`
	TransCurrency string `json:"trans_currency"`
	SendPayDate   string `json:"send_pay_date"`
}

// QueryPayment implements payment.Querier: alipay.trade.query of out_trade_no orderID, read
// by the same rules as a notification. WAIT_BUYER_PAY and ACQ.TRADE_NOT_EXIST are
// payment.ErrNotFound; TRADE_CLOSED is a failed payment — also for a trade that was paid and
// then refunded in full, which Alipay reports closed too.
func (p *Provider) QueryPayment(ctx context.Context, orderID string) (payment.Notification, error) {
	if orderID == "" {
		return payment.Notification{}, errors.New("alipay query payment: empty order id")
	}
	var resp tradeQueryResponse
	err := p.call(ctx, "alipay.trade.query", struct {
		OutTradeNo string `json:"out_trade_no"`
	}{orderID}, &resp)
	if tradeNotExist(err) {
		return payment.Notification{}, fmt.Errorf("alipay query payment %s: %w: %w", orderID, payment.ErrNotFound, err)
	}
	if err != nil {
		return payment.Notification{}, fmt.Errorf("alipay query payment %s: %w", orderID, err)
	}
	if resp.OutTradeNo != orderID {
		return payment.Notification{}, fmt.Errorf("alipay query payment %s: answer about out_trade_no %q", orderID, resp.OutTradeNo)
	}
	n, err := p.payment(trade{
		TradeNo: resp.TradeNo, OutTradeNo: resp.OutTradeNo, Status: resp.TradeStatus,
		TotalAmount: resp.TotalAmount, Currency: resp.TransCurrency, PaidAt: resp.SendPayDate,
	})
	if errors.Is(err, errUnpaid) {
		return payment.Notification{}, fmt.Errorf("alipay query payment %s: %w: %s", orderID, payment.ErrNotFound, resp.TradeStatus)
	}
	if err != nil {
		return payment.Notification{}, fmt.Errorf("alipay query payment %s: %w", orderID, err)
	}
	return n, nil
}

// call POSTs method with biz as biz_content to the gateway, signed with the app key, verifies
// the response's signature with the Alipay public key over the raw text of its
// <method>_response object (error_response for a call the gateway could not route), and
// decodes the object into out when its code is 10000. A signed answer with another code is an
// *APIError. An answer that does not verify — unsigned ones included, as the gateway's answers
// to a request whose own signature failed are — is an error: a refusal or a "no such trade" is
// only believed when Alipay signed it.
func (p *Provider) call(ctx context.Context, method string, biz, out any) error {
	bizJSON, err := json.Marshal(biz)
	if err != nil {
		return fmt.Errorf("%s: encode biz_content: %w", method, err)
	}
	params := map[string]string{
		"app_id": p.appID, "method": method, "format": "JSON", "charset": "utf-8", "sign_type": "RSA2",
		"timestamp": p.now().In(beijing).Format(TimeLayout), "version": "1.0", "biz_content": string(bizJSON),
	}
	digest := sha256.Sum256([]byte(signContent(params, "sign")))
	sig, err := rsa.SignPKCS1v15(nil, p.key, crypto.SHA256, digest[:])
	if err != nil {
		return fmt.Errorf("%s: sign: %w", method, err)
	}
	params["sign"] = base64.StdEncoding.EncodeToString(sig)
	form := url.Values{}
	for k, v := range params {
		form.Set(k, v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.gateway, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=utf-8")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "stockflow-payment-adapter")
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("%s: read response: %w", method, err)
	}
	if len(raw) > maxResponse {
		return fmt.Errorf("%s: response larger than %d bytes", method, maxResponse)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: gateway answered HTTP %d", method, resp.StatusCode)
	}
	obj, err := p.verifyResponse(method, raw)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	var e APIError
	if err := json.Unmarshal(obj, &e); err != nil {
		return fmt.Errorf("%s: decode response: %w", method, err)
	}
	if e.Code != "10000" {
		return &e
	}
	if err := json.Unmarshal(obj, out); err != nil {
		return fmt.Errorf("%s: decode response: %w", method, err)
	}
	return nil
}

// verifyResponse returns the raw text of the response object of method in raw, once its sign
// verifies. The text is taken as received (json.RawMessage), never re-encoded: the signature
// is over those bytes.
func (p *Provider) verifyResponse(method string, raw []byte) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("response is not a JSON object: %w", err)
	}
	name := strings.ReplaceAll(method, ".", "_") + "_response"
	obj, ok := top[name]
	if !ok {
		if obj, ok = top["error_response"]; !ok {
			return nil, fmt.Errorf("response without %s", name)
		}
	}
	var sign string
	if s, ok := top["sign"]; !ok || json.Unmarshal(s, &sign) != nil || sign == "" {
		var e APIError
		_ = json.Unmarshal(obj, &e) // what the unverified answer claims, for the error text only
		return nil, fmt.Errorf("unsigned answer (unverified code %q sub_code %q)", e.Code, e.SubCode)
	}
	sig, err := base64.StdEncoding.DecodeString(sign)
	if err != nil {
		return nil, errors.New("response sign is not base64")
	}
	if err := verify(p.alipay, obj, sig); err != nil {
		return nil, errors.New("response sign does not verify with the Alipay public key")
	}
	return obj, nil
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
