package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/pkg/postgres/pgtest"
	"github.com/stockflow/stockflow/tools/compare"
	"github.com/stockflow/stockflow/tools/flashsale"
)

// The operations console (services/console, decision 0007) in Debian's chromium, headless,
// against the system TestMain started: sign in per role, the four-eyes adjustment, a
// reconcile check, the water level during a sale. Screenshots go to .run/console-*.png.

const chromium = "/usr/bin/chromium"

// browser starts a headless chromium with a fresh profile for one test.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the console's browser tests need Debian's chromium at %s (apt-get install chromium; .ci/run installs it)", chromium)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	b, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(b)) // start the browser now
	return b
}

// tab opens a tab of b signed in as subject with roles: each tab has its own sessionStorage,
// so each is its own person.
func tab(t *testing.T, b context.Context, subject string, roles ...auth.Role) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	t.Cleanup(cancel)
	tok := token(t, subject, roles...)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(sys.ConsoleURL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), tok),
		chromedp.Click(chromedp.CSS("#signin-btn")),
		chromedp.WaitVisible(chromedp.CSS("#who")),
	))
	assert.Equal(t, subject, text(t, ctx, "#who"))
	return ctx
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	require.NoError(t, err, "text of %s", sel)
	return strings.TrimSpace(s)
}

// waitText waits until the element sel exists and its text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	expr := fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? '').includes(%q)`, sel, want)
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.textContent ?? '(no %s)'`, sel, sel)))
		flashText, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#flash')?.textContent ?? ''`))
		t.Fatalf("%s never contained %q: %q (flash: %q): %v", sel, want, got, flashText, err)
	}
}

// reconcileLoaded waits until the reconcile page has every figure it fetches (it marks its
// view data-loaded): a click aimed before that can hit a page still being drawn.
func reconcileLoaded(t *testing.T, ctx context.Context) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#view > [data-loaded]') !== null`,
		chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	require.NoError(t, err, "the reconcile page never finished loading")
}

func exists(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q) !== null`, sel)))
	require.NoError(t, err)
	return ok
}

func goTo(t *testing.T, ctx context.Context, hash string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, hash)))
	require.NoError(t, err)
}

// screenshot saves the tab's viewport as .run/console-<name>.png in the checkout.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir, err := filepath.Abs("../../.run")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "console-"+name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
}

// TestConsoleSignInShowsWhoAndOnlyTheRolesActions: a malformed token is refused with a reason;
// a viewer sees a SKU's figures, bar and fold but no operation; an operator sees the
// adjustment form, verify and reconcile checks, but no repair (admin only).
func TestConsoleSignInShowsWhoAndOnlyTheRolesActions(t *testing.T) {
	c := client{t}
	sku := "CON-" + randomHex(3)
	c.createSKU(sku, 40)
	b := browser(t)

	bad, cancel := chromedp.NewContext(b)
	defer cancel()
	require.NoError(t, chromedp.Do(bad, chromedp.Navigate(sys.ConsoleURL+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), "not-a-token"), chromedp.Click(chromedp.CSS("#signin-btn"))))
	waitText(t, bad, "#signin-error", "not a JWT")

	viewer := tab(t, b, "vic", auth.Viewer)
	assert.Equal(t, "viewer", text(t, viewer, "#roles"))
	goTo(t, viewer, "#/skus/"+sku)
	waitText(t, viewer, `#sku-list tr[data-sku="`+sku+`"]`, "40")
	screenshot(t, viewer, "sku-list")
	require.NoError(t, chromedp.Do(viewer, chromedp.Click(chromedp.CSS(`#sku-list tr[data-sku="`+sku+`"]`))))
	waitText(t, viewer, "#fold-verdict", "fold to the summary")
	assert.Equal(t, "40", text(t, viewer, `#figures td[data-figure="available"]`))
	assert.Equal(t, "available 40", text(t, viewer, `#bar [data-figure="available"]`))
	assert.False(t, exists(t, viewer, "#adj-form"), "a viewer gets no adjustment form")
	waitText(t, viewer, "#po-list", "No purchase orders")
	assert.False(t, exists(t, viewer, "#po-form"), "a viewer orders no purchase")
	assert.False(t, exists(t, viewer, "#verify"), "a viewer gets no verify button")
	screenshot(t, viewer, "viewer-sku")

	ops := tab(t, b, "olga", auth.Operator, auth.Viewer)
	goTo(t, ops, "#/sku/"+sku)
	waitText(t, ops, "#fold-verdict", "fold to the summary")
	assert.True(t, exists(t, ops, "#adj-form"), "an operator requests adjustments")
	require.NoError(t, chromedp.Do(ops, chromedp.Click(chromedp.CSS("#verify"))))
	waitText(t, ops, "#verify-result", "every SKU's ledger folds to its summary")
	goTo(t, ops, "#/reconcile")
	require.NoError(t, chromedp.Do(ops, chromedp.WaitVisible(chromedp.CSS(`#reconcile-stock button[data-mode="check"]`))))
	assert.False(t, exists(t, ops, `button[data-mode="repair"]`), "repair is the admin's")

	goTo(t, ops, "#/sku/NO-SUCH-"+randomHex(2))
	waitText(t, ops, "#sku-error", "sku_not_found")
	screenshot(t, ops, "operator-unknown-sku")
}

// TestConsoleAdjustmentNeedsASecondPerson: alice (operator and approver) requests an
// adjustment in the console, her own approval is refused and the page says why; bob approves
// it in his tab; the page shows who requested and who decided, and the SKU moved.
func TestConsoleAdjustmentNeedsASecondPerson(t *testing.T) {
	c := client{t}
	sku := "CON-" + randomHex(3)
	c.createSKU(sku, 100)
	b := browser(t)

	alice := tab(t, b, "alice", auth.Operator, auth.Approver)
	goTo(t, alice, "#/sku/"+sku)
	// Bad input is refused with the service's reason on the page.
	require.NoError(t, chromedp.Do(alice, chromedp.WaitVisible(chromedp.CSS("#adj-form")),
		chromedp.SetValue(chromedp.CSS("#adj-qty"), "-3"), chromedp.Click(chromedp.CSS("#adj-submit"))))
	waitText(t, alice, "#flash", "invalid_adjustment")
	waitText(t, alice, "#flash", "reason is required")
	require.NoError(t, chromedp.Do(alice,
		chromedp.SetValue(chromedp.CSS("#adj-qty"), "-3"),
		chromedp.SetValue(chromedp.CSS("#adj-reason"), "three broken in the warehouse"),
		chromedp.Click(chromedp.CSS("#adj-submit"))))
	waitText(t, alice, "#move-result", "pending, requested by alice")
	id := strings.TrimPrefix(text(t, alice, "#adj-link"), "#")

	goTo(t, alice, "#/adjustment/"+id)
	waitText(t, alice, "#adj-requested-by", "alice")
	waitText(t, alice, "#own-note", "second approver")
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.CSS("#approve"))))
	waitText(t, alice, "#decide-result", "self_approval")
	screenshot(t, alice, "self-approval-refused")
	assert.Equal(t, float64(100), c.sku(sku)["on_hand"], "the refused approval changed nothing")

	bob := tab(t, b, "bob", auth.Approver)
	goTo(t, bob, "#/adjustment/"+id)
	waitText(t, bob, "#adj-state", "pending")
	assert.False(t, exists(t, bob, "#own-note"))
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.CSS("#approve"))))
	waitText(t, bob, "#adj-state", "approved")
	waitText(t, bob, "#adj-decided-by", "bob")
	assert.Equal(t, "alice", text(t, bob, "#adj-requested-by"))
	screenshot(t, bob, "approved-by-bob")
	assert.Equal(t, float64(97), c.sku(sku)["on_hand"])

	// A purchase order of 20 arrives in two parts; a second one of 10 is closed after 4 came:
	// incoming rises and falls, on hand gains what was received, every step by alice.
	goTo(t, alice, "#/sku/"+sku)
	waitText(t, alice, "#fold-verdict", "fold to the summary")
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS("#po-qty"), "20"),
		chromedp.SetValue(chromedp.CSS("#po-remark"), "supplier A"), chromedp.Click(chromedp.CSS("#po-create"))))
	waitText(t, alice, "#flash", "for 20 by alice")
	poID := strings.TrimPrefix(strings.Fields(text(t, alice, "#flash"))[2], "#")
	waitText(t, alice, `#figures td[data-figure="incoming"]`, "20")
	receive := func(id, n string) {
		t.Helper()
		require.NoError(t, chromedp.Do(alice, chromedp.WaitVisible(chromedp.CSS(`[data-receive-qty="`+id+`"]`)),
			chromedp.SetValue(chromedp.CSS(`[data-receive-qty="`+id+`"]`), n), chromedp.Click(chromedp.CSS(`[data-receive="`+id+`"]`))))
		waitText(t, alice, "#flash", "received "+n)
	}
	receive(poID, "8")
	waitText(t, alice, `[data-po-status="`+poID+`"]`, "partially_received")
	waitText(t, alice, `[data-po-received="`+poID+`"]`, "8 / 20")
	// More than is outstanding is refused by stock and changes nothing.
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS(`[data-receive-qty="`+poID+`"]`), "13"),
		chromedp.Click(chromedp.CSS(`[data-receive="`+poID+`"]`))))
	waitText(t, alice, "#flash", "Receipt refused")
	assert.Equal(t, float64(105), c.sku(sku)["on_hand"])
	receive(poID, "12")
	waitText(t, alice, `[data-po-status="`+poID+`"]`, "received")
	waitText(t, alice, `#figures td[data-figure="on_hand"]`, "117")
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS("#po-qty"), "10"), chromedp.Click(chromedp.CSS("#po-create"))))
	waitText(t, alice, "#flash", "for 10 by alice")
	second := strings.TrimPrefix(strings.Fields(text(t, alice, "#flash"))[2], "#")
	receive(second, "4")
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.CSS(`[data-close="`+second+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok"))))
	waitText(t, alice, "#confirm-text", "6 units not received")
	require.NoError(t, chromedp.Do(alice, chromedp.Click(chromedp.CSS("#confirm-ok"))))
	waitText(t, alice, `[data-po-status="`+second+`"]`, "closed")
	waitText(t, alice, `#figures td[data-figure="incoming"]`, "0")
	assert.Equal(t, float64(121), c.sku(sku)["on_hand"])
	assert.Equal(t, float64(0), c.sku(sku)["incoming"])
	screenshot(t, alice, "purchase-orders")

	// The ledger, filtered by stock, finds the adjustment's row; the fold still matches.
	waitText(t, alice, "#fold-verdict", "fold to the summary")
	_, err := chromedp.Run(alice, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#f-type'); s.value = 'manual_adjust'; s.dispatchEvent(new Event('input')); })()`))
	require.NoError(t, err)
	waitText(t, alice, "#ledger-info", "1 rows on page 1")
	waitText(t, alice, "#ledger-table tbody", "manual_adjust")
	screenshot(t, alice, "ledger-filtered")

	// A stocktake: alice sees the variance as she types the count; bob finds it in the queue
	// and sees its variance against the book before he approves it.
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS("#adj-kind"), "stocktake"),
		chromedp.SendKeys(chromedp.CSS("#adj-qty"), "124")))
	waitText(t, alice, "#adj-preview", "Book on hand 121; counted 124 → variance +3")
	require.NoError(t, chromedp.Do(alice, chromedp.SetValue(chromedp.CSS("#adj-reason"), "monthly count"),
		chromedp.Click(chromedp.CSS("#adj-submit"))))
	waitText(t, alice, "#move-result", "pending, requested by alice")
	count := strings.TrimPrefix(text(t, alice, "#adj-link"), "#")
	goTo(t, bob, "#/adjustments/pending")
	require.NoError(t, chromedp.Do(bob, chromedp.WaitVisible(chromedp.CSS(`#adj-list tr[data-adj="`+count+`"]`))))
	waitText(t, bob, `#adj-list tr[data-adj="`+count+`"]`, "counted 124")
	screenshot(t, bob, "adjustment-queue")
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.CSS(`#adj-list tr[data-adj="`+count+`"]`))))
	waitText(t, bob, "#variance", "counted 124, on hand 121 now → +3")
	require.NoError(t, chromedp.Do(bob, chromedp.Click(chromedp.CSS("#approve"))))
	waitText(t, bob, "#adj-state", "approved")
	assert.Equal(t, float64(124), c.sku(sku)["on_hand"])
	goTo(t, bob, "#/adjustments/approved")
	waitText(t, bob, `#adj-list tr[data-adj="`+count+`"]`, "bob")
}

// TestConsoleReconcileCheckFromTheBrowser: an operator runs stock's ledger_summary check
// through the confirmation dialog and reads the run it made.
func TestConsoleReconcileCheckFromTheBrowser(t *testing.T) {
	b := browser(t)
	ops := tab(t, b, "olga", auth.Operator, auth.Viewer)
	goTo(t, ops, "#/reconcile")
	reconcileLoaded(t, ops)
	check := `#reconcile-stock button[data-job="ledger_summary"][data-mode="check"]`
	require.NoError(t, chromedp.Do(ops, chromedp.Click(chromedp.CSS(check)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok"))))
	waitText(t, ops, "#confirm-text", "ledger_summary job: check")
	require.NoError(t, chromedp.Do(ops, chromedp.Click(chromedp.CSS("#confirm-ok"))))
	waitText(t, ops, "#flash", "stock ledger_summary check run")
	waitText(t, ops, "#flash", "found 0")
	runID := strings.Fields(strings.SplitAfter(text(t, ops, "#flash"), " run ")[1])[0]
	reconcileLoaded(t, ops) // the run re-rendered the page
	row := fmt.Sprintf(`#reconcile-stock tr[data-run="%s"]`, runID)
	require.NoError(t, chromedp.Do(ops, chromedp.WaitVisible(chromedp.CSS(row)), chromedp.Click(chromedp.CSS(row))))
	waitText(t, ops, "#run-summary", "Checked")
	waitText(t, ops, `#reconcile-stock [data-last="ledger_summary"]`, "run "+runID+", check by api:olga")
	waitText(t, ops, "#reconcile-stock .findings", "Nothing found")
	screenshot(t, ops, "reconcile-check")

	// An admin may repair; Cancel in the confirmation runs nothing, Confirm runs the repair.
	admin := tab(t, b, "root", auth.Admin)
	goTo(t, admin, "#/reconcile")
	reconcileLoaded(t, admin)
	repair := `#reconcile-stock button[data-job="overdue_locks"][data-mode="repair"]`
	require.NoError(t, chromedp.Do(admin, chromedp.Click(chromedp.CSS(repair)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-cancel")), chromedp.Click(chromedp.CSS("#confirm-cancel"))))
	waitText(t, admin, "#flash", "overdue_locks: cancelled")
	require.NoError(t, chromedp.Do(admin, chromedp.Click(chromedp.CSS(repair)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok"))))
	waitText(t, admin, "#confirm-text", "REPAIR")
	require.NoError(t, chromedp.Do(admin, chromedp.Click(chromedp.CSS("#confirm-ok"))))
	waitText(t, admin, "#flash", "stock overdue_locks repair run")
}

// TestConsoleWaterLevelMovesDuringASale: a viewer watches a SKU live while a small flash sale
// runs on it; the chart's figures move from all available to sold.
func TestConsoleWaterLevelMovesDuringASale(t *testing.T) {
	c := client{t}
	sku := "CON-LIVE-" + randomHex(3)
	b := browser(t)
	viewer := tab(t, b, "vic", auth.Viewer)

	cfg := saleConfig(t)
	cfg.SKU = sku
	cfg.Units, cfg.Buyers, cfg.Concurrency = 30, 60, 8
	cfg.PaymentTimeout = 2 * time.Second
	cfg.ArrivalWindow = 4 * time.Second
	cfg.SettleTimeout = 20 * time.Second
	cfg.ChartPath = filepath.Join(t.TempDir(), "sale.png")
	cfg.GateLead = 2 * time.Second // the SKU exists (and the page can open it) before buyers arrive

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		rep, err := flashsale.Run(ctx, cfg, nil)
		if err == nil && rep != nil {
			for _, ch := range rep.Checks {
				if !ch.Pass {
					err = fmt.Errorf("%s: %s", ch.Name, ch.Detail)
				}
			}
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		status, _ := c.call("GET", sys.URLs["stock"]+"/v1/skus/"+sku, nil, nil)
		return status == http.StatusOK
	}, 15*time.Second, 50*time.Millisecond, "the sale never created its SKU")
	goTo(t, viewer, "#/sku/"+sku)
	require.NoError(t, chromedp.Do(viewer, chromedp.WaitVisible(chromedp.CSS("#live-start")), chromedp.Click(chromedp.CSS("#live-start"))))
	waitText(t, viewer, "#live-status", "live")
	waitText(t, viewer, `#live-legend [data-live="available"]`, "available")
	// The water level moves: something is locked or sold while the page watches.
	_, err := chromedp.Run(viewer, chromedp.Poll[bool](`(() => {
		const n = (k) => Number((document.querySelector('#live-legend [data-live="' + k + '"]')?.textContent ?? '').split(' ')[1]);
		return n('sold') > 0 && n('available') < 30;
	})()`, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(200*time.Millisecond)))
	require.NoError(t, err, "the water level never moved: %s", text(t, viewer, "#live-legend"))
	points, err := chromedp.Run(viewer, chromedp.Evaluate[string](`document.querySelector('#chart polyline.l-sold').getAttribute('points')`))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(strings.Fields(points)), 2, "the chart has a line of readings")
	screenshot(t, viewer, "water-level")
	require.NoError(t, <-done, "the sale's own checks")

	final := c.sku(sku)
	raw, _ := json.Marshal(final)
	t.Logf("after the sale: %s", raw)
}

// TestConsoleOrderTimeline: a viewer finds a buyer's order and reads what happened to it
// across the services: created, awaiting payment, paid; the payment; its deadline.
func TestConsoleOrderTimeline(t *testing.T) {
	c := client{t}
	sku := "CON-ORD-" + randomHex(3)
	c.createSKU(sku, 10)
	buyer := "u-" + randomHex(3)
	status, resp := c.place(buyer, map[string]any{"items": []item{{SKU: sku, Qty: 2}}, "currency": "CNY"})
	require.Equal(t, http.StatusCreated, status, "%v", resp)
	id := resp["order_id"].(string)
	c.waitStatus(id, "awaiting_payment", 10*time.Second)
	status, resp = c.pay(id, 9800, "txn-"+id)
	require.Equal(t, http.StatusOK, status, "%v", resp)
	c.waitStatus(id, "paid", 10*time.Second)

	b := browser(t)
	viewer := tab(t, b, "vic", auth.Viewer)
	goTo(t, viewer, "#/orders")
	require.NoError(t, chromedp.Do(viewer, chromedp.WaitVisible(chromedp.CSS("#order-q")),
		chromedp.SetValue(chromedp.CSS("#order-q"), buyer), chromedp.Click(chromedp.CSS(`#order-search button[type="submit"]`))))
	waitText(t, viewer, "#orders", id)
	require.NoError(t, chromedp.Do(viewer, chromedp.Click(chromedp.CSS("#orders tr.clickable"))))
	waitText(t, viewer, "#order-status", "paid")
	waitText(t, viewer, "#timeline", "awaiting_payment")
	waitText(t, viewer, "#timeline", "succeeded 9800 CNY via sandbox")
	waitText(t, viewer, "#timeline", "payment deadline")
	screenshot(t, viewer, "order-timeline")

	goTo(t, viewer, "#/orders/nobody-"+randomHex(2))
	waitText(t, viewer, "#order-out", "No orders of buyer")
}

// TestConsoleComparePage: a small compare runs on this system (the single column in a scratch
// database, the Redis counter on the gate's Redis, stockflow itself) and writes the report
// the console reads; the page follows it to the end and shows each design's figures as the
// report has them, stockflow's with nothing oversold or stuck.
func TestConsoleComparePage(t *testing.T) {
	signer, err := sys.Signer()
	require.NoError(t, err)
	cfg := compare.Default()
	cfg.Units, cfg.Buyers, cfg.SecondWave, cfg.PayRate = 12, 30, 12, 0.5
	cfg.Deadline, cfg.Arrivals, cfg.Grace, cfg.Settle = 2*time.Second, 300*time.Millisecond, 3*time.Second, 15*time.Second
	cfg.Seed = 5
	cfg.Out = sys.CompareReport()
	cfg.DatabaseURL, cfg.ScratchDB, cfg.RedisURL = pgtest.ServerURL(), dbPrefix+"compare", sys.RedisURL
	cfg.OrderURL, cfg.StockURL, cfg.PaymentURL = sys.URLs["order"], sys.URLs["stock"], sys.URLs["payment-adapter"]
	cfg.SandboxSecret, cfg.Signer = sandboxSecret, signer

	b := browser(t)
	viewer := tab(t, b, "vic", auth.Viewer)
	goTo(t, viewer, "#/compare")
	waitText(t, viewer, "#compare-missing", "make compare") // before any run: how to make one

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan *compare.Report, 1)
	go func() {
		rep, err := compare.Run(ctx, cfg, nil)
		assert.NoError(t, err, "a design did not run, or stockflow broke a promise")
		done <- rep
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(cfg.Out); return err == nil }, 30*time.Second, 100*time.Millisecond, "no report written")
	goTo(t, viewer, "#/skus")
	goTo(t, viewer, "#/compare")
	waitText(t, viewer, "#compare-head", "12 units")
	rep := <-done
	require.NotNil(t, rep)
	waitText(t, viewer, "#compare-done", "Done")
	screenshot(t, viewer, "compare")
	for _, d := range rep.Designs {
		for k, v := range map[string]int64{"sold": d.Result.Sold, "oversold": d.Result.Oversold, "stuck": d.Result.Stuck, "second_wave_sold": d.Result.SecondWaveSold} {
			assert.Equal(t, fmt.Sprint(v), text(t, viewer, fmt.Sprintf(`[data-design=%q] [data-result=%q]`, d.Name, k)), "%s %s", d.Name, k)
		}
	}
	sf := rep.Design(compare.Stockflow)
	assert.Zero(t, sf.Result.Oversold)
	assert.Zero(t, sf.Result.Stuck)
	assert.Equal(t, cfg.Units, sf.Result.Sold, "the unpaid units, released, went to the second wave")
}
