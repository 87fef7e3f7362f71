// Package wechatpaytest is a test double of WeChat Pay's side of API v3: a real HTTP server
// (httptest) that speaks the protocol wechatpay.Provider speaks, for provider, app-level and
// end-to-end tests that need WeChat Pay without the internet.
//
// A Server has its own keys — a platform RSA key with a self-signed certificate, a merchant
// key pair, a random APIv3 key — and Config returns the wechatpay.Config that trusts them and
// points at the server. It produces callbacks signed and sealed as WeChat Pay's
// (PaymentNotification, RefundNotification, Notification for anything else, Sign for raw
// bodies). As an API it checks the merchant's Authorization signature on every request
// (401 SIGN_ERROR when it does not verify), signs every response with the platform key, and
// serves:
//
//   - POST /v3/refund/domestic/refunds: idempotent per out_refund_no (asking again returns the
//     same refund and refunds nothing more); new refunds start as SetRefundStatus says
//     (SUCCESS unless told PROCESSING, ABNORMAL or CLOSED), and CompleteRefund finishes a
//     PROCESSING one; only transactions it was told about (AddTransaction, or
//     PaymentNotification) can be refunded, never for more than was paid.
//   - GET /v3/refund/domestic/refunds/{out_refund_no}: 404 RESOURCE_NOT_EXISTS when unknown.
//   - GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=…: 404 ORDER_NOT_EXIST when
//     unknown.
//
// FailNext and BreakNextSignature make the next answer an error or unverifiable. The server
// is closed when the test ends; it is safe for concurrent use.
package wechatpaytest

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay"
)

// The merchant a Server serves (WeChat Pay's documentation examples).
const (
	MchID = "1900000109"
	AppID = "wxd678efh567hg6787"
)

// beijing is China Standard Time, the zone of WeChat Pay's RFC 3339 times.
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

// Server is a WeChat Pay API v3 test double. Build it with New.
type Server struct {
	t        TB
	srv      *httptest.Server
	cfg      wechatpay.Config
	aead     cipher.AEAD
	merchant *rsa.PublicKey
	platform *rsa.PrivateKey
	serial   string // the platform certificate's serial number

	mu            sync.Mutex
	transactions  map[string]*transaction // by out_trade_no
	refunds       map[string]*Refund      // by out_refund_no
	refundCalls   map[string]int
	refundStatus  string
	failures      []failure
	badSignatures int
	seq           int
}

type failure struct {
	status        int
	code, message string
}

type transaction struct {
	outTradeNo, transactionID string
	total                     int64
	currency, tradeState      string
	successTime               time.Time
	refunded                  int64
}

// Refund is a refund the server holds.
type Refund struct {
	OutRefundNo   string
	RefundID      string
	TransactionID string
	OutTradeNo    string
	Amount        int64 // fen
	Total         int64 // the transaction's total, fen
	Currency      string
	Reason        string
	Status        string // SUCCESS, PROCESSING, ABNORMAL or CLOSED
	SuccessTime   time.Time
}

// New starts a server with fresh keys; it is closed when t's cleanups run (a test's end).
func New(t TB) *Server {
	t.Helper()
	keys, err := generateKeys(2)
	if err != nil {
		t.Fatalf("wechatpaytest: %v", err)
	}
	platform, merchant := keys[0], keys[1]
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 159))
	if err != nil {
		t.Fatalf("wechatpaytest: serial: %v", err)
	}
	serial.SetBit(serial, 159, 1) // 40 hex digits, as WeChat Pay's serials
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "wechatpaytest platform", Organization: []string{"Tenpay.com"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &platform.PublicKey, platform)
	if err != nil {
		t.Fatalf("wechatpaytest: certificate: %v", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(merchant)
	if err != nil {
		t.Fatalf("wechatpaytest: merchant key: %v", err)
	}
	apiV3Key := (rand.Text() + rand.Text())[:32]
	block, err := aes.NewCipher([]byte(apiV3Key))
	if err != nil {
		t.Fatalf("wechatpaytest: APIv3 key: %v", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatalf("wechatpaytest: APIv3 key: %v", err)
	}
	var merchantSerial [20]byte
	_, _ = rand.Read(merchantSerial[:]) // crypto/rand.Read never fails

	s := &Server{
		t: t, aead: aead, merchant: &merchant.PublicKey, platform: platform, serial: fmt.Sprintf("%X", serial),
		transactions: map[string]*transaction{}, refunds: map[string]*Refund{}, refundCalls: map[string]int{},
		refundStatus: "SUCCESS",
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/refund/domestic/refunds", s.serve(s.createRefund))
	mux.HandleFunc("GET /v3/refund/domestic/refunds/{out_refund_no}", s.serve(s.queryRefund))
	mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{out_trade_no}", s.serve(s.queryTransaction))
	mux.HandleFunc("/", s.serve(func(*http.Request, []byte) (int, any) {
		return http.StatusNotFound, apiError{"NOT_FOUND", "no such API in wechatpaytest"}
	}))
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	s.cfg = wechatpay.Config{
		MchID: MchID, AppID: AppID,
		MerchantSerialNo:      strings.ToUpper(hex.EncodeToString(merchantSerial[:])),
		MerchantPrivateKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})),
		APIv3Key:              apiV3Key,
		PlatformPublicKeys:    map[string]string{s.serial: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))},
		BaseURL:               s.srv.URL,
	}
	return s
}

// generateKeys returns n fresh RSA-2048 keys, generated side by side: key generation is most
// of what a test double costs to start.
func generateKeys(n int) ([]*rsa.PrivateKey, error) {
	keys, errs := make([]*rsa.PrivateKey, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = rsa.GenerateKey(rand.Reader, 2048) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("generate keys: %w", err)
	}
	return keys, nil
}

// Config returns the merchant's configuration for this server: its keys, and BaseURL pointing
// at it. Each call returns a fresh copy.
func (s *Server) Config() wechatpay.Config {
	c := s.cfg
	c.PlatformPublicKeys = map[string]string{s.serial: s.cfg.PlatformPublicKeys[s.serial]}
	return c
}

// Serial returns the platform certificate's serial number, the Wechatpay-Serial it signs under.
func (s *Server) Serial() string { return s.serial }

// AddTransaction records a transaction of the merchant, as a payment would have made it:
// tradeState is SUCCESS, PAYERROR, CLOSED, NOTPAY, … (the query answers it; only a SUCCESS one
// can be refunded). txnID may be empty for a transaction never paid. Adding an out_trade_no
// again replaces it.
func (s *Server) AddTransaction(orderID, txnID string, total int64, currency, tradeState string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addTransaction(orderID, txnID, total, currency, tradeState)
}

func (s *Server) addTransaction(orderID, txnID string, total int64, currency, tradeState string) *transaction {
	tx := &transaction{outTradeNo: orderID, transactionID: txnID, total: total, currency: currency, tradeState: tradeState}
	if tradeState == "SUCCESS" {
		tx.successTime = time.Now().Truncate(time.Second)
	}
	s.transactions[orderID] = tx
	return tx
}

// SetRefundStatus sets the status new refunds start in: SUCCESS (the default), PROCESSING
// (until CompleteRefund), ABNORMAL or CLOSED.
func (s *Server) SetRefundStatus(status string) {
	switch status {
	case "SUCCESS", "PROCESSING", "ABNORMAL", "CLOSED":
	default:
		s.t.Fatalf("wechatpaytest: refund status %q", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refundStatus = status
}

// CompleteRefund makes the PROCESSING refund outRefundNo SUCCESS, as WeChat Pay does when the
// money is back, and returns its REFUND.SUCCESS callback.
func (s *Server) CompleteRefund(outRefundNo string) (http.Header, []byte) {
	s.t.Helper()
	s.mu.Lock()
	rf, ok := s.refunds[outRefundNo]
	if !ok || rf.Status != "PROCESSING" {
		s.mu.Unlock()
		s.t.Fatalf("wechatpaytest: no PROCESSING refund %q", outRefundNo)
		return nil, nil
	}
	s.succeed(rf)
	s.mu.Unlock()
	return s.RefundNotification(rf.OutTradeNo, rf.TransactionID, outRefundNo, "SUCCESS")
}

// succeed makes rf SUCCESS and takes its amount off the transaction. Call it with s.mu held.
func (s *Server) succeed(rf *Refund) {
	rf.Status, rf.SuccessTime = "SUCCESS", time.Now().Truncate(time.Second)
	if tx := s.transactions[rf.OutTradeNo]; tx != nil {
		tx.refunded += rf.Amount
		if tx.refunded >= tx.total {
			tx.tradeState = "REFUND"
		}
	}
}

// Refund returns the refund out_refund_no the server holds.
func (s *Server) Refund(outRefundNo string) (Refund, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rf, ok := s.refunds[outRefundNo]
	if !ok {
		return Refund{}, false
	}
	return *rf, true
}

// RefundList returns copies of the refunds the server holds, by out_refund_no.
func (s *Server) RefundList() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, 0, len(s.refunds))
	for _, rf := range s.refunds {
		out = append(out, *rf)
	}
	slices.SortFunc(out, func(a, b Refund) int { return strings.Compare(a.OutRefundNo, b.OutRefundNo) })
	return out
}

// Refunds returns how many refunds the server holds: asking twice with one out_refund_no
// makes one.
func (s *Server) Refunds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.refunds)
}

// RefundCalls returns how many authenticated refund requests for outRefundNo reached the
// refund logic (requests answered by FailNext are not counted).
func (s *Server) RefundCalls(outRefundNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refundCalls[outRefundNo]
}

// FailNext makes the server answer the next authenticated request, whatever it is, with
// status and {"code":code,"message":message}, signed. Calls queue up.
func (s *Server) FailNext(status int, code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{status, code, message})
}

// BreakNextSignature makes the next answer carry a signature that does not verify.
func (s *Server) BreakNextSignature() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badSignatures++
}

// PaymentNotification returns a TRANSACTION.SUCCESS callback, signed now and sealed under the
// APIv3 key, for the transaction it also records (AddTransaction): tradeState is SUCCESS for
// a paid one (WeChat Pay sends no other), or what a test needs.
func (s *Server) PaymentNotification(orderID, txnID string, total int64, currency, tradeState string) (http.Header, []byte) {
	s.mu.Lock()
	tx := s.addTransaction(orderID, txnID, total, currency, tradeState)
	res := transactionJSON(tx)
	s.mu.Unlock()
	return s.Notification("TRANSACTION.SUCCESS", res, time.Now())
}

// RefundNotification returns the REFUND.<refundStatus> callback (SUCCESS, ABNORMAL or CLOSED)
// of the refund outRefundNo of transaction txnID of order orderID, signed now. A refund the
// server holds is described as it is held (its refund_id, its amounts); for another one a
// refund_id is made up.
func (s *Server) RefundNotification(orderID, txnID, outRefundNo, refundStatus string) (http.Header, []byte) {
	s.mu.Lock()
	rf, ok := s.refunds[outRefundNo]
	if !ok {
		rf = &Refund{OutRefundNo: outRefundNo, RefundID: s.nextRefundID(), TransactionID: txnID, OutTradeNo: orderID, Currency: "CNY"}
	}
	res := refundJSON(rf)
	s.mu.Unlock()
	res.Status = ""
	res.MchID, res.RefundStatus, res.TransactionID, res.OutTradeNo = MchID, refundStatus, txnID, orderID
	return s.Notification("REFUND."+refundStatus, res, time.Now())
}

// Notification returns a callback of eventType whose resource is v (a []byte is sealed as it
// is, anything else as its JSON), sealed under the APIv3 key and signed at at — a time more
// than wechatpay.Tolerance away makes an expired or future one.
func (s *Server) Notification(eventType string, v any, at time.Time) (http.Header, []byte) {
	s.t.Helper()
	plain, ok := v.([]byte)
	if !ok {
		var err error
		if plain, err = json.Marshal(v); err != nil {
			s.t.Fatalf("wechatpaytest: encode resource: %v", err)
		}
	}
	kind, _, _ := strings.Cut(strings.ToLower(eventType), ".")
	nonce := rand.Text()[:s.aead.NonceSize()]
	body, err := json.Marshal(map[string]any{
		"id":            "EV-" + rand.Text(),
		"create_time":   at.In(beijing).Format(time.RFC3339),
		"event_type":    eventType,
		"resource_type": "encrypt-resource",
		"summary":       "wechatpaytest " + eventType,
		"resource": map[string]string{
			"algorithm":       "AEAD_AES_256_GCM",
			"ciphertext":      base64.StdEncoding.EncodeToString(s.aead.Seal(nil, []byte(nonce), plain, []byte(kind))),
			"nonce":           nonce,
			"associated_data": kind,
			"original_type":   kind,
		},
	})
	if err != nil {
		s.t.Fatalf("wechatpaytest: encode callback: %v", err)
	}
	return s.Sign(body, at), body
}

// Sign returns the Wechatpay-* headers of WeChat Pay's signature of body at time at. It may
// be called inside a fuzz target of the testing.F the server was made with (it does not call
// t.Helper, which a testing.F refuses there).
func (s *Server) Sign(body []byte, at time.Time) http.Header {
	h, err := s.sign(body, at)
	if err != nil {
		s.t.Fatalf("wechatpaytest: %v", err)
	}
	return h
}

// sign is Sign for the server's goroutines, which must not call t.Fatal.
func (s *Server) sign(body []byte, at time.Time) (http.Header, error) {
	ts, nonce := strconv.FormatInt(at.Unix(), 10), rand.Text()
	digest := sha256.Sum256([]byte(ts + "\n" + nonce + "\n" + string(body) + "\n"))
	sig, err := rsa.SignPKCS1v15(nil, s.platform, crypto.SHA256, digest[:])
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	h := http.Header{}
	h.Set(wechatpay.HeaderTimestamp, ts)
	h.Set(wechatpay.HeaderNonce, nonce)
	h.Set(wechatpay.HeaderSignature, base64.StdEncoding.EncodeToString(sig))
	h.Set(wechatpay.HeaderSerial, s.serial)
	return h, nil
}

// apiError is WeChat Pay's error body.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// handler answers an authenticated request with a status and a body to encode.
type handler func(r *http.Request, body []byte) (int, any)

// serve authenticates the request, answers a queued failure or calls h, and signs the answer.
func (s *Server) serve(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		status, v := s.answer(h, r)
		body, err := json.Marshal(v)
		if err != nil {
			status, body = http.StatusInternalServerError, []byte(`{"code":"SYSTEM_ERROR","message":"wechatpaytest: encode answer"}`)
		}
		s.mu.Lock()
		signed := body
		if s.badSignatures > 0 {
			s.badSignatures--
			signed = append([]byte("not the body"), body...)
		}
		s.mu.Unlock()
		hdr, err := s.sign(signed, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for k, vs := range hdr {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-ID", rand.Text())
		w.WriteHeader(status)
		_, _ = w.Write(body) // the client went away: nothing to do
	}
}

func (s *Server) answer(h handler, r *http.Request) (int, any) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return http.StatusBadRequest, apiError{"PARAM_ERROR", "read body: " + err.Error()}
	}
	if err := s.authenticate(r, body); err != nil {
		return http.StatusUnauthorized, apiError{"SIGN_ERROR", err.Error()}
	}
	s.mu.Lock()
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		s.mu.Unlock()
		return f.status, apiError{f.code, f.message}
	}
	s.mu.Unlock()
	return h(r, body)
}

// authenticate checks the merchant's Authorization header: the scheme, this merchant and its
// serial, a timestamp within wechatpay.Tolerance, and the signature over
// "METHOD\nURI\ntimestamp\nnonce\nbody\n".
func (s *Server) authenticate(r *http.Request, body []byte) error {
	params, ok := strings.CutPrefix(r.Header.Get("Authorization"), "WECHATPAY2-SHA256-RSA2048 ")
	if !ok {
		return errors.New("the Authorization header is not WECHATPAY2-SHA256-RSA2048")
	}
	auth := map[string]string{}
	for _, kv := range strings.Split(params, ",") {
		k, v, ok := strings.Cut(kv, "=")
		uq, err := strconv.Unquote(v)
		if !ok || err != nil {
			return fmt.Errorf("the Authorization parameter %q is not k=\"v\"", kv)
		}
		auth[k] = uq
	}
	if auth["mchid"] != MchID || auth["serial_no"] != s.cfg.MerchantSerialNo || auth["nonce_str"] == "" {
		return fmt.Errorf("the Authorization is of mchid %q serial_no %q nonce_str %q", auth["mchid"], auth["serial_no"], auth["nonce_str"])
	}
	sec, err := strconv.ParseInt(auth["timestamp"], 10, 64)
	if d := time.Since(time.Unix(sec, 0)); err != nil || d > wechatpay.Tolerance || d < -wechatpay.Tolerance {
		return fmt.Errorf("the Authorization timestamp %q is not now", auth["timestamp"])
	}
	sig, err := base64.StdEncoding.DecodeString(auth["signature"])
	if err != nil {
		return errors.New("the Authorization signature is not base64")
	}
	msg := r.Method + "\n" + r.RequestURI + "\n" + auth["timestamp"] + "\n" + auth["nonce_str"] + "\n" + string(body) + "\n"
	digest := sha256.Sum256([]byte(msg))
	if err := rsa.VerifyPKCS1v15(s.merchant, crypto.SHA256, digest[:], sig); err != nil {
		return errors.New("signature does not verify with the merchant key")
	}
	return nil
}

type refundRequest struct {
	TransactionID string `json:"transaction_id"`
	OutTradeNo    string `json:"out_trade_no"`
	OutRefundNo   string `json:"out_refund_no"`
	Reason        string `json:"reason"`
	NotifyURL     string `json:"notify_url"`
	FundsAccount  string `json:"funds_account"`
	Amount        struct {
		Refund   int64  `json:"refund"`
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

func (s *Server) createRefund(_ *http.Request, body []byte) (int, any) {
	var req refundRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return http.StatusBadRequest, apiError{"PARAM_ERROR", "body: " + err.Error()}
	}
	if req.OutRefundNo == "" || (req.TransactionID == "") == (req.OutTradeNo == "") {
		return http.StatusBadRequest, apiError{"PARAM_ERROR", "out_refund_no and one of transaction_id, out_trade_no are required"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refundCalls[req.OutRefundNo]++
	if rf, ok := s.refunds[req.OutRefundNo]; ok {
		return http.StatusOK, refundJSON(rf)
	}
	var tx *transaction
	for _, t := range s.transactions {
		if (req.TransactionID != "" && t.transactionID == req.TransactionID) || (req.TransactionID == "" && t.outTradeNo == req.OutTradeNo) {
			tx = t
		}
	}
	switch {
	case tx == nil:
		return http.StatusNotFound, apiError{"RESOURCE_NOT_EXISTS", "订单不存在"}
	case tx.tradeState != "SUCCESS":
		return http.StatusBadRequest, apiError{"INVALID_REQUEST", "订单状态不正确: " + tx.tradeState}
	case req.Amount.Currency != tx.currency:
		return http.StatusBadRequest, apiError{"PARAM_ERROR", "币种与原订单不一致"}
	case req.Amount.Total != tx.total:
		return http.StatusBadRequest, apiError{"INVALID_REQUEST", "订单金额与原订单不一致"}
	case req.Amount.Refund <= 0 || req.Amount.Refund > tx.total-tx.refunded:
		return http.StatusBadRequest, apiError{"INVALID_REQUEST", "申请退款金额超过订单可退金额"}
	}
	rf := &Refund{
		OutRefundNo: req.OutRefundNo, RefundID: s.nextRefundID(), TransactionID: tx.transactionID, OutTradeNo: tx.outTradeNo,
		Amount: req.Amount.Refund, Total: tx.total, Currency: tx.currency, Reason: req.Reason, Status: s.refundStatus,
	}
	s.refunds[rf.OutRefundNo] = rf
	if rf.Status == "SUCCESS" {
		s.succeed(rf)
	}
	return http.StatusOK, refundJSON(rf)
}

func (s *Server) queryRefund(r *http.Request, _ []byte) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rf, ok := s.refunds[r.PathValue("out_refund_no")]
	if !ok {
		return http.StatusNotFound, apiError{"RESOURCE_NOT_EXISTS", "退款单不存在"}
	}
	return http.StatusOK, refundJSON(rf)
}

func (s *Server) queryTransaction(r *http.Request, _ []byte) (int, any) {
	if r.URL.Query().Get("mchid") != MchID {
		return http.StatusBadRequest, apiError{"PARAM_ERROR", "mchid 与请求的商户号不一致"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, ok := s.transactions[r.PathValue("out_trade_no")]
	if !ok {
		return http.StatusNotFound, apiError{"ORDER_NOT_EXIST", "订单不存在"}
	}
	return http.StatusOK, transactionJSON(tx)
}

// nextRefundID makes up a refund_id. Call it with s.mu held.
func (s *Server) nextRefundID() string {
	s.seq++
	return fmt.Sprintf("50300%024d", s.seq)
}

type amountJSON struct {
	Total         int64  `json:"total"`
	PayerTotal    int64  `json:"payer_total,omitempty"`
	Refund        int64  `json:"refund,omitempty"`
	PayerRefund   int64  `json:"payer_refund,omitempty"`
	Currency      string `json:"currency,omitempty"`
	PayerCurrency string `json:"payer_currency,omitempty"`
}

type transactionResource struct {
	MchID          string     `json:"mchid"`
	AppID          string     `json:"appid"`
	OutTradeNo     string     `json:"out_trade_no"`
	TransactionID  string     `json:"transaction_id,omitempty"`
	TradeType      string     `json:"trade_type"`
	TradeState     string     `json:"trade_state"`
	TradeStateDesc string     `json:"trade_state_desc"`
	BankType       string     `json:"bank_type,omitempty"`
	SuccessTime    string     `json:"success_time,omitempty"`
	Payer          any        `json:"payer,omitempty"`
	Amount         amountJSON `json:"amount"`
}

func transactionJSON(tx *transaction) transactionResource {
	res := transactionResource{
		MchID: MchID, AppID: AppID, OutTradeNo: tx.outTradeNo, TransactionID: tx.transactionID,
		TradeType: "NATIVE", TradeState: tx.tradeState, TradeStateDesc: "wechatpaytest " + tx.tradeState,
		Amount: amountJSON{Total: tx.total, Currency: tx.currency},
	}
	if !tx.successTime.IsZero() {
		res.SuccessTime = tx.successTime.In(beijing).Format(time.RFC3339)
		res.BankType, res.Payer = "OTHERS", map[string]string{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
		res.Amount.PayerTotal, res.Amount.PayerCurrency = tx.total, tx.currency
	}
	return res
}

type refundResource struct {
	MchID               string     `json:"mchid,omitempty"`
	RefundID            string     `json:"refund_id"`
	OutRefundNo         string     `json:"out_refund_no"`
	TransactionID       string     `json:"transaction_id"`
	OutTradeNo          string     `json:"out_trade_no"`
	Channel             string     `json:"channel,omitempty"`
	UserReceivedAccount string     `json:"user_received_account"`
	SuccessTime         string     `json:"success_time,omitempty"`
	CreateTime          string     `json:"create_time,omitempty"`
	Status              string     `json:"status,omitempty"`
	RefundStatus        string     `json:"refund_status,omitempty"`
	Amount              amountJSON `json:"amount"`
}

// refundJSON describes rf as the refund API does (status; a callback has refund_status).
func refundJSON(rf *Refund) refundResource {
	res := refundResource{
		RefundID: rf.RefundID, OutRefundNo: rf.OutRefundNo, TransactionID: rf.TransactionID, OutTradeNo: rf.OutTradeNo,
		Channel: "ORIGINAL", UserReceivedAccount: "支付用户零钱", Status: rf.Status,
		Amount: amountJSON{Total: rf.Total, Refund: rf.Amount, PayerTotal: rf.Total, PayerRefund: rf.Amount, Currency: rf.Currency},
	}
	if !rf.SuccessTime.IsZero() {
		res.SuccessTime = rf.SuccessTime.In(beijing).Format(time.RFC3339)
	}
	return res
}
