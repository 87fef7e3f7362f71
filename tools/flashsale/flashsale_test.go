package flashsale

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func smallConfig(t *testing.T, url, secret string) Config {
	cfg := Default()
	cfg.OrderURL, cfg.StockURL, cfg.PaymentURL, cfg.SandboxSecret = url, url, url, secret
	cfg.Units, cfg.Buyers, cfg.Concurrency = 40, 120, 16
	cfg.PaymentTimeout = time.Second
	cfg.ArrivalWindow = 500 * time.Millisecond
	cfg.RetryRatio, cfg.RetryDelay = 0.5, 200*time.Millisecond
	cfg.SampleInterval = 100 * time.Millisecond
	cfg.SettleTimeout = 5 * time.Second
	cfg.ChartPath = filepath.Join(t.TempDir(), "water.png")
	cfg.Seed = 7
	return cfg
}

func TestRunPassesEveryCheckAgainstACorrectSystem(t *testing.T) {
	fake, srv := newFake(t, "s3cret")
	fake.unknown = 5 // the adapter has not seen the first orders yet: the buyers retry
	cfg := smallConfig(t, srv.URL, "s3cret")

	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, rep)
	}
	if rep.Gate != "unavailable" || rep.TurnedAway != 0 {
		t.Errorf("gate %q, turned away %d: want unavailable (the fake has no Redis) and 0", rep.Gate, rep.TurnedAway)
	}
	for _, c := range rep.Checks {
		if !c.Pass {
			t.Errorf("%s: %s", c.Name, c.Detail)
		}
	}
	sum := 0
	for _, n := range rep.ByStatus {
		sum += n
	}
	if sum != rep.Orders || rep.Orders < cfg.Buyers {
		t.Errorf("orders by status %d, orders %d, buyers %d", sum, rep.Orders, cfg.Buyers)
	}
	if rep.ByStatus["rejected"] == 0 || rep.ByStatus["paid"] == 0 || rep.LedgerRows["release_timeout"] == 0 {
		t.Errorf("expected a sell-out with rejections, payments and timeouts: %v %v", rep.ByStatus, rep.LedgerRows)
	}
	if rep.Retries == 0 {
		t.Error("no buyer came back")
	}
	if rep.Final.Sold != rep.PaidUnits || rep.Final.Sold > cfg.Units {
		t.Errorf("sold %d, paid units %d", rep.Final.Sold, rep.PaidUnits)
	}

	text := rep.String()
	for _, want := range []string{"orders by final status", "ledger rows by change type", "water level (every", "PASS  no oversell", "all 16 checks passed", "stock's /metrics during the sale: locks +"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	f, err := os.Open(cfg.ChartPath)
	if err != nil {
		t.Fatalf("chart: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
		t.Errorf("chart is %v", b)
	}
}

func TestRunFailsWhenTheSystemOversells(t *testing.T) {
	fake, srv := newFake(t, "s3cret")
	fake.oversell = true
	cfg := smallConfig(t, srv.URL, "s3cret")
	cfg.PayRatio, cfg.CancelRatio = 1, 0
	cfg.ChartPath = ""

	rep, err := Run(context.Background(), cfg, nil)
	if err == nil || !rep.Failed() {
		t.Fatalf("Run passed an overselling system:\n%s", rep)
	}
	if c, _ := rep.Check(CheckNoOversell); c.Pass {
		t.Errorf("no-oversell check passed: %s", c.Detail)
	}
	if !strings.Contains(rep.String(), "FAIL  no oversell") {
		t.Errorf("report does not show the failure:\n%s", rep)
	}
}

func TestRunFailsWhenStockMetricsDisagreeWithTheLedger(t *testing.T) {
	fake, srv := newFake(t, "s3cret")
	fake.miscount = true
	cfg := smallConfig(t, srv.URL, "s3cret")
	cfg.Buyers, cfg.ChartPath = 30, ""

	rep, err := Run(context.Background(), cfg, nil)
	if err == nil {
		t.Fatal("Run passed with stock's metrics counting a lock that is not in the ledger")
	}
	if c, _ := rep.Check(CheckMetrics); c.Pass {
		t.Errorf("metrics check passed: %s", c.Detail)
	}
	for name, pass := range map[string]bool{CheckNoOversell: true, CheckLedgerFold: true} {
		if c, _ := rep.Check(name); c.Pass != pass {
			t.Errorf("%s: %+v", name, c)
		}
	}
}

func TestRunCountsAWrongSignatureAsFailedPayments(t *testing.T) {
	_, srv := newFake(t, "s3cret")
	cfg := smallConfig(t, srv.URL, "wrong")
	cfg.Buyers, cfg.ChartPath = 20, ""

	rep, err := Run(context.Background(), cfg, nil)
	if err == nil {
		t.Fatal("Run passed with every payment refused")
	}
	if c, _ := rep.Check(CheckNoErrors); c.Pass || !strings.Contains(c.Detail, "401") {
		t.Errorf("failed payments not reported: %+v", c)
	}
	if rep.ByStatus["paid"] != 0 {
		t.Errorf("paid orders without a valid payment: %v", rep.ByStatus)
	}
}

func TestValidateRejectsImpossibleRatios(t *testing.T) {
	cfg := Default()
	cfg.PayRatio, cfg.CancelRatio = 0.9, 0.2
	if cfg.Validate() == nil {
		t.Error("pay 0.9 + cancel 0.2 accepted")
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
