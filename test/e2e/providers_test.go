package e2e

// The real payment providers end to end: paysim, the launcher's stand-in for Stripe, WeChat
// Pay and Alipay, makes payments and signs their callbacks exactly as each provider does, and
// answers the adapter's refunds and queries with the providers' own APIs.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/tools/flashsale"
)

var providers = []string{"stripe", "wechatpay", "alipay"}

// callback is a provider's callback as paysim made it.
type callback struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// simPayment is paysim's answer to a payment.
type simPayment struct {
	ProviderTxnID string    `json:"provider_txn_id"`
	Callback      *callback `json:"callback"`
	Delivered     *struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"delivered"`
}

type simRefund struct {
	ProviderRefundID string `json:"provider_refund_id"`
	OrderID          string `json:"order_id"`
	Amount           int64  `json:"amount"`
	Status           string `json:"status"`
}

// sim calls paysim's control API and decodes its 200 answer into out.
func sim(t *testing.T, method, path string, body, out any) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, sys.PaysimURL+path, bytes.NewReader(raw))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "paysim %s %s: %s", method, path, b)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s", b)
	}
}

// providerPays has provider take a payment for the order; the callback is delivered unless
// deliver is false.
func providerPays(t *testing.T, provider, orderID string, amount int64, deliver bool) simPayment {
	t.Helper()
	var p simPayment
	sim(t, "POST", "/"+provider+"/payments", map[string]any{"order_id": orderID, "amount": amount, "currency": "CNY", "deliver": deliver}, &p)
	require.NotNil(t, p.Callback)
	if deliver {
		require.NotNil(t, p.Delivered)
		require.Less(t, p.Delivered.Status, 300, "%s: %s", provider, p.Delivered.Body)
	}
	return p
}

// post delivers a callback to the adapter as its provider would and returns the answer.
func post(t *testing.T, cb callback) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", cb.URL, strings.NewReader(cb.Body))
	require.NoError(t, err)
	for k, v := range cb.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// payments is the adapter's payments of the order: provider → status, and the refund's status.
func (c client) payments(orderID string) []map[string]any {
	c.t.Helper()
	status, body := c.call("GET", sys.URLs["payment-adapter"]+"/v1/payments?order_id="+orderID, nil, nil)
	require.Equal(c.t, http.StatusOK, status, "%v", body)
	var out []map[string]any
	for _, p := range body["payments"].([]any) {
		out = append(out, p.(map[string]any))
	}
	return out
}

func refundStatus(p map[string]any) string {
	r, _ := p["refund"].(map[string]any)
	return str(r["status"])
}

func simRefunds(t *testing.T, provider, orderID string) []simRefund {
	t.Helper()
	var all, mine []simRefund
	sim(t, "GET", "/"+provider+"/refunds", nil, &all)
	for _, r := range all {
		if r.OrderID == orderID {
			mine = append(mine, r)
		}
	}
	return mine
}

// TestEachProviderEndToEnd: per provider, a forged and an expired callback are refused and
// store nothing, the genuine one pays the order, its replay changes nothing, and the refund
// goes through the provider — in two steps where the provider has them (pending, then the
// provider's notification).
func TestEachProviderEndToEnd(t *testing.T) {
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			c := client{t}
			sku := newSKU(t, c, 5)
			id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 4900})
			c.waitStatus(id, "awaiting_payment", 10*time.Second)
			p := providerPays(t, provider, id, 4900, false)

			forged := *p.Callback
			forged.Body += " " // one byte the provider did not sign
			status, answer := post(t, forged)
			assert.GreaterOrEqual(t, status, 400, "forged: %s", answer)
			assert.Less(t, status, 500, "forged: %s", answer)
			var expired callback
			sim(t, "POST", "/"+provider+"/sign", map[string]any{"body": p.Callback.Body, "at": time.Now().Add(-27 * time.Hour)}, &expired)
			status, answer = post(t, expired)
			assert.GreaterOrEqual(t, status, 400, "expired: %s", answer)
			assert.Less(t, status, 500, "expired: %s", answer)
			assert.Empty(t, c.payments(id), "a refused callback stores nothing")
			assert.Equal(t, "awaiting_payment", c.getOrder(id)["status"])

			status, answer = post(t, *p.Callback)
			require.Less(t, status, 300, answer)
			c.waitStatus(id, "paid", 10*time.Second)
			for range 2 {
				status, answer = post(t, *p.Callback)
				require.Less(t, status, 300, "a replay is acknowledged: %s", answer)
			}
			time.Sleep(300 * time.Millisecond) // time for a wrongly applied replay to land
			pays := c.payments(id)
			require.Len(t, pays, 1, "the replays made no payment")
			assert.Equal(t, provider, pays[0]["provider"])
			assert.Equal(t, p.ProviderTxnID, pays[0]["provider_txn_id"])
			assert.Equal(t, [4]float64{5, 4, 0, 1}, figures(c, sku), "sold once")

			twoStep := provider != "alipay" // Alipay refunds at once
			if twoStep {
				sim(t, "POST", "/"+provider+"/refund-status", map[string]any{"status": "pending"}, nil)
				defer sim(t, "POST", "/"+provider+"/refund-status", map[string]any{"status": "succeeded"}, nil)
			}
			status, body := c.call("POST", sys.URLs["order"]+"/v1/orders/"+id+"/refund", nil, nil)
			require.Less(t, status, 300, "%v", body)
			var refunds []simRefund
			require.Eventually(t, func() bool { refunds = simRefunds(t, provider, id); return len(refunds) == 1 },
				15*time.Second, 50*time.Millisecond, "the adapter asks the provider for the refund")
			assert.Equal(t, int64(4900), refunds[0].Amount)
			if twoStep {
				require.Eventually(t, func() bool { return refundStatus(c.payments(id)[0]) == "pending" },
					10*time.Second, 50*time.Millisecond, "the provider accepted it; the money is not back yet")
				assert.Equal(t, "succeeded", c.payments(id)[0]["status"])
				var done simPayment
				sim(t, "POST", "/"+provider+"/refunds/"+refunds[0].ProviderRefundID+"/complete", map[string]any{}, &done)
				require.Less(t, done.Delivered.Status, 300, done.Delivered.Body)
			}
			require.Eventually(t, func() bool { return c.payments(id)[0]["status"] == "refunded" },
				15*time.Second, 50*time.Millisecond, "the provider's confirmation completes the refund")
			c.waitStatus(id, "refunded", 15*time.Second)
			assert.Len(t, simRefunds(t, provider, id), 1, "refunded once")
			require.Eventually(t, func() bool { return figures(c, sku) == [4]float64{5, 5, 0, 0} },
				10*time.Second, 50*time.Millisecond, "the refund restocks: %v", figures(c, sku))
			c.requireConsistent()
		})
	}
}

// TestDoublePaymentKeepsTheFirstAndRefundsTheSecond (review F4): a buyer pays one order at two
// providers; whichever callback comes first sells, the other payment is refunded through its
// provider, and the order ends paid.
func TestDoublePaymentKeepsTheFirstAndRefundsTheSecond(t *testing.T) {
	for _, pair := range [][2]string{{"wechatpay", "alipay"}, {"alipay", "wechatpay"}, {"stripe", "wechatpay"}} {
		t.Run(pair[0]+"_then_"+pair[1], func(t *testing.T) {
			c := client{t}
			sku := newSKU(t, c, 5)
			id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 4900})
			c.waitStatus(id, "awaiting_payment", 10*time.Second)
			first := providerPays(t, pair[0], id, 4900, true)
			second := providerPays(t, pair[1], id, 4900, true)
			c.waitStatus(id, "paid", 10*time.Second)
			require.Eventually(t, func() bool { return len(simRefunds(t, pair[1], id)) == 1 },
				15*time.Second, 50*time.Millisecond, "the second payment is refunded at its provider")
			require.Eventually(t, func() bool {
				var got []string
				for _, p := range c.payments(id) {
					got = append(got, str(p["provider_txn_id"])+"="+str(p["status"]))
				}
				slices.Sort(got)
				want := []string{first.ProviderTxnID + "=succeeded", second.ProviderTxnID + "=refunded"}
				slices.Sort(want)
				return slices.Equal(got, want)
			}, 15*time.Second, 50*time.Millisecond, "the first payment is kept, the second refunded")
			assert.Empty(t, simRefunds(t, pair[0], id), "the kept payment is not refunded")
			assert.Equal(t, "paid", c.getOrder(id)["status"], "never refunded while a payment is kept")
			assert.Equal(t, [4]float64{5, 4, 0, 1}, figures(c, sku), "sold once")
			c.requireConsistent()
		})
	}
}

// TestALostCallbackIsFoundByAskingTheProvider: the provider took the payment but its callback
// never arrived; the lost_callbacks job asks, records the payment through the callback's path,
// and the order is paid. The callback arriving at last is a duplicate.
func TestALostCallbackIsFoundByAskingTheProvider(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 4900})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	p := providerPays(t, "wechatpay", id, 4900, false)

	fs := c.reconcile("payment-adapter", "lost_callbacks", "check", id)
	require.Len(t, fs, 1, "%v", fs)
	assert.Equal(t, "lost_callback", fs[0]["kind"])
	assert.Equal(t, "awaiting_payment", c.getOrder(id)["status"], "check changes nothing")
	c.reconcile("payment-adapter", "lost_callbacks", "repair", id)
	c.waitStatus(id, "paid", 10*time.Second)
	assert.Empty(t, c.reconcile("payment-adapter", "lost_callbacks", "check", id), "nothing lost any more")

	status, answer := post(t, *p.Callback)
	require.Less(t, status, 300, answer)
	time.Sleep(300 * time.Millisecond)
	require.Len(t, c.payments(id), 1, "the late callback is a duplicate")
	assert.Equal(t, [4]float64{5, 4, 0, 1}, figures(c, sku))
	c.requireConsistent()
}

// TestARefundWhoseNotificationNeverCameIsCompletedByQuery: the provider finished the refund
// but its notification was lost; the unconfirmed_refunds job asks and completes it.
func TestARefundWhoseNotificationNeverCameIsCompletedByQuery(t *testing.T) {
	c := client{t}
	sku := newSKU(t, c, 5)
	id := c.order("30m", item{SKU: sku, Qty: 1, UnitPrice: 4900})
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	providerPays(t, "stripe", id, 4900, true)
	c.waitStatus(id, "paid", 10*time.Second)
	sim(t, "POST", "/stripe/refund-status", map[string]any{"status": "pending"}, nil)
	defer sim(t, "POST", "/stripe/refund-status", map[string]any{"status": "succeeded"}, nil)
	status, body := c.call("POST", sys.URLs["order"]+"/v1/orders/"+id+"/refund", nil, nil)
	require.Less(t, status, 300, "%v", body)
	var refunds []simRefund
	require.Eventually(t, func() bool { refunds = simRefunds(t, "stripe", id); return len(refunds) == 1 },
		15*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return refundStatus(c.payments(id)[0]) == "pending" }, 10*time.Second, 50*time.Millisecond)
	sim(t, "POST", "/stripe/refunds/"+refunds[0].ProviderRefundID+"/complete", map[string]any{"deliver": false}, nil)

	c.reconcile("payment-adapter", "unconfirmed_refunds", "repair", id)
	require.Eventually(t, func() bool { return c.payments(id)[0]["status"] == "refunded" }, 10*time.Second, 50*time.Millisecond)
	c.waitStatus(id, "refunded", 15*time.Second)
	c.requireConsistent()
}

// TestFlashSaleThroughEachProvider runs a small flash sale with every buyer paying through
// Stripe, WeChat Pay or Alipay (paysim delivering the provider-signed callbacks), as
// `stockflow demo -provider …` does, and checks the sale's invariants and who was paid.
func TestFlashSaleThroughEachProvider(t *testing.T) {
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			c := client{t}
			cfg := flashsale.Default()
			cfg.OrderURL, cfg.StockURL, cfg.PaymentURL = sys.URLs["order"], sys.URLs["stock"], sys.URLs["payment-adapter"]
			cfg.Provider, cfg.PaysimURL = provider, sys.PaysimURL
			signer, err := sys.Signer()
			require.NoError(t, err)
			cfg.Signer = signer
			cfg.Units, cfg.Buyers, cfg.Concurrency = 30, 60, 8
			cfg.PaymentTimeout, cfg.ArrivalWindow, cfg.RetryDelay = 2*time.Second, 2*time.Second, time.Second
			cfg.SettleTimeout, cfg.ChartPath, cfg.Gate = 20*time.Second, "", false
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep, err := flashsale.Run(ctx, cfg, nil)
			require.NotNil(t, rep, "%v", err)
			require.NoError(t, err, "%s", rep)
			for _, ch := range rep.Checks {
				assert.True(t, ch.Pass, "%s: %s", ch.Name, ch.Detail)
			}
			require.Positive(t, rep.ByStatus["paid"], "%v", rep.ByStatus)
			for _, o := range rep.Outcomes {
				if o.Status == "paid" {
					pays := c.payments(o.OrderID)
					require.Len(t, pays, 1, "order %s", o.OrderID)
					assert.Equal(t, provider, pays[0]["provider"], "order %s", o.OrderID)
					break
				}
			}
		})
	}
}
