// Package alipaytest is a test double of Alipay's open-platform gateway: a real HTTP server
// (httptest) that speaks the protocol alipay.Provider speaks (RSA2, public-key mode), for
// provider, app-level and end-to-end tests that need Alipay without the internet.
//
// A Server has its own key pairs — the app's and Alipay's — and Config returns the
// alipay.Config that uses them and points at the server. It produces asynchronous
// notifications signed as Alipay's (PaymentNotification, RefundNotification, Notification
// for any parameters). As a gateway it checks every request's common parameters and its
// RSA2 sign with the app's public key (40002 isv.invalid-signature, unsigned, when it does
// not verify), signs every other answer with Alipay's key over the raw *_response text, and
// serves:
//
//   - alipay.trade.refund: synchronous, idempotent per out_request_no (asking again answers
//     fund_change N and refunds nothing more); only trades it was told about (AddTrade, or
//     PaymentNotification) in TRADE_SUCCESS can be refunded, never for more than was paid,
//     and a trade refunded in full becomes TRADE_CLOSED.
//   - alipay.trade.fastpay.refund.query: REFUND_SUCCESS for a refund it made, an answer
//     without refund for one it did not.
//   - alipay.trade.query: 40004 ACQ.TRADE_NOT_EXIST for a trade it does not know.
//
// FailNext and BreakNextSignature make the next answer an error or unverifiable. The server
// is closed when the test ends; it is safe for concurrent use.
package alipaytest

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay"
)

// The app and the seller a Server serves.
const (
	AppID    = "2021000000000001"
	SellerID = "2088000000000001"
)

// beijing is China Standard Time, the zone of Alipay's times.
var beijing = time.FixedZone("CST", 8*60*60)

// TB is the part of testing.TB the double uses, so it also runs outside go test (paysim, the
// provider simulator, passes its own): Fatalf must not return normally — testing's ends the
// goroutine, paysim's panics — and Cleanup's funcs run when the double is done with.
// *testing.T, *testing.B and *testing.F satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Server is an Alipay gateway test double. Build it with New.
type Server struct {
	t      TB
	srv    *httptest.Server
	cfg    alipay.Config
	app    *rsa.PublicKey
	alipay *rsa.PrivateKey

	mu            sync.Mutex
	trades        map[string]*trade  // by out_trade_no
	refunds       map[string]*Refund // by out_request_no
	refundCalls   map[string]int
	calls         map[string]int // by method
	failures      []failure
	badSignatures int
}

type failure struct{ code, subCode, subMsg string }

type trade struct {
	outTradeNo, tradeNo string
	total, refunded     int64 // fen
	status              string
	paidAt              time.Time
}

// Refund is a refund the server made.
type Refund struct {
	OutRequestNo string
	TradeNo      string
	OutTradeNo   string
	Amount       int64 // fen
	Reason       string
	At           time.Time
}

// New starts a server with fresh keys; it is closed when t's cleanups run (a test's end).
func New(t TB) *Server {
	t.Helper()
	keys, errs := make([]*rsa.PrivateKey, 2), make([]error, 2)
	var wg sync.WaitGroup
	for i := range keys { // side by side: key generation is most of what the double costs
		wg.Go(func() { keys[i], errs[i] = rsa.GenerateKey(rand.Reader, 2048) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("alipaytest: generate keys: %v", err)
	}
	app, ali := keys[0], keys[1]
	appDER, err := x509.MarshalPKCS8PrivateKey(app)
	if err != nil {
		t.Fatalf("alipaytest: app key: %v", err)
	}
	aliDER, err := x509.MarshalPKIXPublicKey(&ali.PublicKey)
	if err != nil {
		t.Fatalf("alipaytest: Alipay key: %v", err)
	}
	s := &Server{
		t: t, app: &app.PublicKey, alipay: ali,
		trades: map[string]*trade{}, refunds: map[string]*Refund{}, refundCalls: map[string]int{}, calls: map[string]int{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.gateway))
	t.Cleanup(s.srv.Close)
	s.cfg = alipay.Config{
		AppID:              AppID,
		AppPrivateKeyPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: appDER})),
		AlipayPublicKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: aliDER})),
		GatewayURL:         s.srv.URL + "/gateway.do",
		SellerID:           SellerID,
	}
	return s
}

// Config returns the app's configuration for this server: its keys, and GatewayURL pointing
// at it.
func (s *Server) Config() alipay.Config { return s.cfg }

// AddTrade records a trade of the app, as a payment would have made it: tradeStatus is
// TRADE_SUCCESS (refundable), WAIT_BUYER_PAY, TRADE_CLOSED or TRADE_FINISHED. Adding an
// out_trade_no again replaces it.
func (s *Server) AddTrade(orderID, tradeNo string, total int64, tradeStatus string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addTrade(orderID, tradeNo, total, tradeStatus)
}

func (s *Server) addTrade(orderID, tradeNo string, total int64, tradeStatus string) *trade {
	t := &trade{outTradeNo: orderID, tradeNo: tradeNo, total: total, status: tradeStatus}
	if tradeStatus == "TRADE_SUCCESS" || tradeStatus == "TRADE_FINISHED" {
		t.paidAt = time.Now().Truncate(time.Second)
	}
	s.trades[orderID] = t
	return t
}

// Refund returns the refund out_request_no the server made.
func (s *Server) Refund(outRequestNo string) (Refund, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rf, ok := s.refunds[outRequestNo]
	if !ok {
		return Refund{}, false
	}
	return *rf, true
}

// RefundList returns copies of the refunds the server holds, by out_request_no.
func (s *Server) RefundList() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refunds))
	for _, rf := range s.refunds {
		out = append(out, *rf)
	}
	slices.SortFunc(out, func(a, b Refund) int { return strings.Compare(a.OutRequestNo, b.OutRequestNo) })
	return out
}

// Refunds returns how many refunds the server made: asking twice with one out_request_no
// makes one.
func (s *Server) Refunds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.refunds)
}

// RefundCalls returns how many authenticated alipay.trade.refund calls for outRequestNo
// reached the refund logic (calls answered by FailNext are not counted).
func (s *Server) RefundCalls(outRequestNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refundCalls[outRequestNo]
}

// Calls returns how many authenticated calls of method (alipay.trade.query, …) the gateway
// answered, FailNext's answers included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// FailNext makes the gateway answer the next authenticated call, whatever it is, with code
// (40004, 20000, …), subCode and subMsg, signed. Calls queue up.
func (s *Server) FailNext(code, subCode, subMsg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{code, subCode, subMsg})
}

// BreakNextSignature makes the next answer carry a sign that does not verify.
func (s *Server) BreakNextSignature() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badSignatures++
}

// PaymentNotification returns the asynchronous notification of the trade it also records
// (AddTrade) — tradeStatus TRADE_SUCCESS for a paid one — as Alipay POSTs it: the header with
// its Content-Type, and the signed form body.
func (s *Server) PaymentNotification(orderID, tradeNo string, total int64, tradeStatus string) (http.Header, []byte) {
	s.mu.Lock()
	t := s.addTrade(orderID, tradeNo, total, tradeStatus)
	s.mu.Unlock()
	f := s.notifyParams(t)
	if !t.paidAt.IsZero() {
		f.Set("gmt_payment", t.paidAt.In(beijing).Format(alipay.TimeLayout))
		f.Set("receipt_amount", alipay.FormatAmount(total))
		f.Set("buyer_pay_amount", alipay.FormatAmount(total))
		f.Set("fund_bill_list", `[{"amount":"`+alipay.FormatAmount(total)+`","fundChannel":"ALIPAYACCOUNT"}]`)
	}
	return s.Notification(f)
}

// RefundNotification returns the notification Alipay sends when the refund outBizNo of
// refundFee fen from the trade succeeded: TRADE_CLOSED once the trade is refunded in full,
// TRADE_SUCCESS before.
func (s *Server) RefundNotification(orderID, tradeNo, outBizNo string, refundFee int64) (http.Header, []byte) {
	s.mu.Lock()
	t, ok := s.trades[orderID]
	if !ok {
		t = &trade{outTradeNo: orderID, tradeNo: tradeNo, total: refundFee, refunded: refundFee}
	}
	cp := *t
	s.mu.Unlock()
	cp.status = "TRADE_SUCCESS"
	if cp.refunded >= cp.total {
		cp.status = "TRADE_CLOSED"
	}
	f := s.notifyParams(&cp)
	f.Set("trade_no", tradeNo)
	f.Set("out_biz_no", outBizNo)
	f.Set("refund_fee", alipay.FormatAmount(refundFee))
	f.Set("gmt_refund", time.Now().In(beijing).Format(alipay.TimeLayout+".000"))
	if cp.status == "TRADE_CLOSED" {
		f.Set("gmt_close", time.Now().In(beijing).Format(alipay.TimeLayout))
	}
	return s.Notification(f)
}

// notifyParams are the parameters every notification about t has.
func (s *Server) notifyParams(t *trade) url.Values {
	now := time.Now().In(beijing)
	return url.Values{
		"notify_time": {now.Format(alipay.TimeLayout)}, "notify_type": {"trade_status_sync"},
		"notify_id": {strings.ToLower(rand.Text())}, "app_id": {AppID}, "charset": {"utf-8"}, "version": {"1.0"},
		"trade_no": {t.tradeNo}, "out_trade_no": {t.outTradeNo}, "trade_status": {t.status},
		"buyer_id": {"2088102122524333"}, "buyer_logon_id": {"159****5620"},
		"seller_id": {SellerID}, "seller_email": {"seller@example.com"},
		"total_amount": {alipay.FormatAmount(t.total)}, "subject": {"stockflow 订单 " + t.outTradeNo},
		"gmt_create": {now.Add(-time.Minute).Format(alipay.TimeLayout)},
	}
}

// Notification returns the notification of the parameters f, signed as Alipay signs it:
// sign_type RSA2 (unless f sets another) and sign over the others but sign_type. It may be
// called inside a fuzz target of the testing.F the server was made with.
func (s *Server) Notification(f url.Values) (http.Header, []byte) {
	signed := url.Values{}
	for k, vs := range f {
		signed[k] = append([]string(nil), vs...)
	}
	if signed.Get("sign_type") == "" {
		signed.Set("sign_type", "RSA2")
	}
	signed.Del("sign")
	sig, err := s.sign([]byte(content(signed, "sign_type")))
	if err != nil {
		s.t.Fatalf("alipaytest: %v", err)
	}
	signed.Set("sign", sig)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	return h, []byte(signed.Encode())
}

// content is what Alipay's form signatures are over: the parameters but sign and skip, by
// name, as k=v joined by &, empty values left out (a repeated parameter counts with its first
// value; the provider refuses such forms).
func content(f url.Values, skip string) string {
	var keys []string
	for k := range f {
		if k != "sign" && k != skip && f.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + f.Get(k)
	}
	return strings.Join(pairs, "&")
}

func (s *Server) sign(msg []byte) (string, error) {
	digest := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(nil, s.alipay, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// errorAnswer is the gateway's answer to a call it did not carry out.
type errorAnswer struct {
	Code    string `json:"code"`
	Msg     string `json:"msg"`
	SubCode string `json:"sub_code"`
	SubMsg  string `json:"sub_msg"`
}

func failed(code, subCode, subMsg string) errorAnswer {
	msg := map[string]string{"20000": "Service Currently Unavailable", "40001": "Missing Required Arguments",
		"40002": "Invalid Arguments", "40004": "Business Failed", "40006": "Insufficient Permissions"}[code]
	return errorAnswer{code, msg, subCode, subMsg}
}

// gateway serves POST /gateway.do.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "alipaytest: POST only", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "alipaytest: "+err.Error(), http.StatusBadRequest)
		return
	}
	method := r.Form.Get("method")
	answer, signed := s.call(r.Form)
	obj, err := json.Marshal(answer)
	if err != nil {
		http.Error(w, "alipaytest: encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	body := `{"` + strings.ReplaceAll(method, ".", "_") + `_response":` + string(obj)
	if signed {
		s.mu.Lock()
		msg := obj
		if s.badSignatures > 0 {
			s.badSignatures--
			msg = append([]byte("not the answer"), obj...)
		}
		s.mu.Unlock()
		sig, err := s.sign(msg)
		if err != nil {
			http.Error(w, "alipaytest: "+err.Error(), http.StatusInternalServerError)
			return
		}
		body += `,"sign":"` + sig + `"`
	}
	w.Header().Set("Content-Type", "text/html;charset=utf-8") // what the gateway says
	_, _ = w.Write([]byte(body + "}"))                        // the client went away: nothing to do
}

// call authenticates a gateway call and answers it; signed is false for the answers the
// gateway does not sign (a call whose own signature failed).
func (s *Server) call(f url.Values) (answer any, signed bool) {
	for k, vs := range f {
		if len(vs) != 1 {
			return failed("40002", "isv.invalid-parameter", "参数 "+k+" 重复"), false
		}
	}
	for k, want := range map[string]string{"app_id": AppID, "format": "JSON", "charset": "utf-8", "sign_type": "RSA2", "version": "1.0"} {
		if f.Get(k) != want {
			return failed("40002", "isv.invalid-"+strings.ReplaceAll(k, "_", "-"), k+" 应为 "+want), false
		}
	}
	at, err := time.ParseInLocation(alipay.TimeLayout, f.Get("timestamp"), beijing)
	if d := time.Since(at); err != nil || d > 15*time.Minute || d < -15*time.Minute {
		return failed("40002", "isv.invalid-timestamp", "非法的时间戳参数"), false
	}
	sig, err := base64.StdEncoding.DecodeString(f.Get("sign"))
	digest := sha256.Sum256([]byte(content(f, "")))
	if err != nil || rsa.VerifyPKCS1v15(s.app, crypto.SHA256, digest[:], sig) != nil {
		return failed("40002", "isv.invalid-signature", "验签出错"), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[f.Get("method")]++
	if len(s.failures) > 0 {
		fl := s.failures[0]
		s.failures = s.failures[1:]
		return failed(fl.code, fl.subCode, fl.subMsg), true
	}
	biz := []byte(f.Get("biz_content"))
	switch f.Get("method") {
	case "alipay.trade.refund":
		return s.refund(biz), true
	case "alipay.trade.fastpay.refund.query":
		return s.queryRefund(biz), true
	case "alipay.trade.query":
		return s.queryTrade(biz), true
	}
	return failed("40002", "isv.invalid-method", "不存在的方法名"), false
}

// decodeBiz decodes biz_content strictly into v.
func decodeBiz(biz []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(biz))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// find returns the trade named by tradeNo, or else by outTradeNo. Call it with s.mu held.
func (s *Server) find(tradeNo, outTradeNo string) *trade {
	for _, t := range s.trades {
		if (tradeNo != "" && t.tradeNo == tradeNo) || (tradeNo == "" && outTradeNo != "" && t.outTradeNo == outTradeNo) {
			return t
		}
	}
	return nil
}

type refundAnswer struct {
	Code         string `json:"code"`
	Msg          string `json:"msg"`
	BuyerLogonID string `json:"buyer_logon_id"`
	FundChange   string `json:"fund_change"`
	GmtRefundPay string `json:"gmt_refund_pay"`
	OutTradeNo   string `json:"out_trade_no"`
	RefundFee    string `json:"refund_fee"`
	TradeNo      string `json:"trade_no"`
	BuyerUserID  string `json:"buyer_user_id"`
}

// refund is alipay.trade.refund. Call it with s.mu held.
func (s *Server) refund(biz []byte) any {
	var req struct {
		TradeNo      string `json:"trade_no"`
		OutTradeNo   string `json:"out_trade_no"`
		RefundAmount string `json:"refund_amount"`
		OutRequestNo string `json:"out_request_no"`
		RefundReason string `json:"refund_reason"`
	}
	if err := decodeBiz(biz, &req); err != nil || req.OutRequestNo == "" {
		return failed("40004", "ACQ.INVALID_PARAMETER", "参数无效")
	}
	amount, err := alipay.ParseAmount(req.RefundAmount)
	if err != nil || amount <= 0 {
		return failed("40004", "ACQ.INVALID_PARAMETER", "退款金额无效")
	}
	t := s.find(req.TradeNo, req.OutTradeNo)
	if t == nil {
		return failed("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	s.refundCalls[req.OutRequestNo]++
	answer := func(fundChange string) refundAnswer {
		return refundAnswer{
			Code: "10000", Msg: "Success", BuyerLogonID: "159****5620", FundChange: fundChange,
			GmtRefundPay: time.Now().In(beijing).Format(alipay.TimeLayout), OutTradeNo: t.outTradeNo,
			RefundFee: alipay.FormatAmount(t.refunded), TradeNo: t.tradeNo, BuyerUserID: "2088102122524333",
		}
	}
	if rf, ok := s.refunds[req.OutRequestNo]; ok {
		if rf.TradeNo != t.tradeNo || rf.Amount != amount {
			return failed("40004", "ACQ.DISCORDANT_REPEAT_REQUEST", "请求信息不一致")
		}
		return answer("N")
	}
	switch {
	case t.status == "TRADE_FINISHED":
		return failed("40004", "ACQ.TRADE_HAS_FINISHED", "交易已完结")
	case t.status != "TRADE_SUCCESS":
		return failed("40004", "ACQ.TRADE_STATUS_ERROR", "交易状态不合法")
	case amount > t.total-t.refunded:
		return failed("40004", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", "退款金额超限")
	}
	s.refunds[req.OutRequestNo] = &Refund{
		OutRequestNo: req.OutRequestNo, TradeNo: t.tradeNo, OutTradeNo: t.outTradeNo,
		Amount: amount, Reason: req.RefundReason, At: time.Now().Truncate(time.Second),
	}
	t.refunded += amount
	if t.refunded == t.total {
		t.status = "TRADE_CLOSED"
	}
	return answer("Y")
}

type refundQueryAnswer struct {
	Code         string `json:"code"`
	Msg          string `json:"msg"`
	OutRequestNo string `json:"out_request_no,omitempty"`
	OutTradeNo   string `json:"out_trade_no,omitempty"`
	RefundAmount string `json:"refund_amount,omitempty"`
	RefundStatus string `json:"refund_status,omitempty"`
	TotalAmount  string `json:"total_amount,omitempty"`
	TradeNo      string `json:"trade_no,omitempty"`
	GmtRefundPay string `json:"gmt_refund_pay,omitempty"`
}

// queryRefund is alipay.trade.fastpay.refund.query. Call it with s.mu held.
func (s *Server) queryRefund(biz []byte) any {
	var req struct {
		TradeNo      string   `json:"trade_no"`
		OutTradeNo   string   `json:"out_trade_no"`
		OutRequestNo string   `json:"out_request_no"`
		QueryOptions []string `json:"query_options"`
	}
	if err := decodeBiz(biz, &req); err != nil || req.OutRequestNo == "" {
		return failed("40004", "ACQ.INVALID_PARAMETER", "参数无效")
	}
	t := s.find(req.TradeNo, req.OutTradeNo)
	if t == nil {
		return failed("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	rf, ok := s.refunds[req.OutRequestNo]
	if !ok || rf.TradeNo != t.tradeNo {
		return refundQueryAnswer{Code: "10000", Msg: "Success"}
	}
	a := refundQueryAnswer{
		Code: "10000", Msg: "Success", OutRequestNo: rf.OutRequestNo, OutTradeNo: t.outTradeNo,
		RefundAmount: alipay.FormatAmount(rf.Amount), RefundStatus: "REFUND_SUCCESS",
		TotalAmount: alipay.FormatAmount(t.total), TradeNo: t.tradeNo,
	}
	for _, o := range req.QueryOptions {
		if o == "gmt_refund_pay" {
			a.GmtRefundPay = rf.At.In(beijing).Format(alipay.TimeLayout)
		}
	}
	return a
}

type tradeAnswer struct {
	Code           string `json:"code"`
	Msg            string `json:"msg"`
	BuyerLogonID   string `json:"buyer_logon_id"`
	BuyerPayAmount string `json:"buyer_pay_amount"`
	OutTradeNo     string `json:"out_trade_no"`
	SendPayDate    string `json:"send_pay_date,omitempty"`
	TotalAmount    string `json:"total_amount"`
	TradeNo        string `json:"trade_no"`
	TradeStatus    string `json:"trade_status"`
	BuyerUserID    string `json:"buyer_user_id"`
}

// queryTrade is alipay.trade.query. Call it with s.mu held.
func (s *Server) queryTrade(biz []byte) any {
	var req struct {
		OutTradeNo   string   `json:"out_trade_no"`
		TradeNo      string   `json:"trade_no"`
		QueryOptions []string `json:"query_options"`
	}
	if err := decodeBiz(biz, &req); err != nil || (req.OutTradeNo == "" && req.TradeNo == "") {
		return failed("40004", "ACQ.INVALID_PARAMETER", "参数无效")
	}
	t := s.find(req.TradeNo, req.OutTradeNo)
	if t == nil {
		return failed("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在")
	}
	a := tradeAnswer{
		Code: "10000", Msg: "Success", BuyerLogonID: "159****5620", BuyerPayAmount: "0.00",
		OutTradeNo: t.outTradeNo, TotalAmount: alipay.FormatAmount(t.total), TradeNo: t.tradeNo,
		TradeStatus: t.status, BuyerUserID: "2088102122524333",
	}
	if !t.paidAt.IsZero() {
		a.SendPayDate, a.BuyerPayAmount = t.paidAt.In(beijing).Format(alipay.TimeLayout), alipay.FormatAmount(t.total)
	}
	return a
}
