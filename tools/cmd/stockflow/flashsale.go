package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stockflow/stockflow/pkg/auth"
	"github.com/stockflow/stockflow/tools/flashsale"
	"github.com/stockflow/stockflow/tools/launcher"
)

// flashSaleFlags parses the flash-sale flags over the defaults; the sandbox secret defaults to
// PAYMENT_SANDBOX_SECRET, as the services read it.
func flashSaleFlags(name string, args []string, getenv func(string) string, stderr io.Writer) (flashsale.Config, error) {
	cfg := flashsale.Default()
	cfg.SandboxSecret = flashsale.EnvSecret(getenv)
	fs := flag.NewFlagSet("stockflow "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.RegisterFlags(fs)
	idpKey := fs.String("idp-key", ".run/auth/idp.jwk", "the identity provider's private JWK that signs the sale's tokens (make up makes a local one)")
	issuer := fs.String("issuer", launcher.Issuer, "iss of the tokens")
	if err := fs.Parse(args); err != nil {
		return cfg, err // flag.ErrHelp after -h: main prints nothing more
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%s: unexpected arguments %q", name, fs.Args())
	}
	if name == "flashsale" { // demo signs with the key its own up made
		s, err := auth.LoadSigner(*idpKey, *issuer, launcher.Audience)
		if err != nil {
			return cfg, fmt.Errorf("%s: %w (-idp-key names the key)", name, err)
		}
		cfg.Signer = s
	}
	return cfg, nil
}

func flashSale(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := flashSaleFlags("flashsale", args, getenv, stderr)
	if err != nil {
		return err
	}
	return runSale(ctx, cfg, stdout, stderr)
}

// runSale runs the sale with its progress on stderr and prints the report to stdout; a failed
// check is an error, so the command exits 1.
func runSale(ctx context.Context, cfg flashsale.Config, stdout, stderr io.Writer) error {
	rep, err := flashsale.Run(ctx, cfg, stderr)
	if rep != nil {
		fmt.Fprintln(stdout)
		if werr := rep.WriteText(stdout); werr != nil {
			return werr
		}
	}
	return err
}

// demoSKU is the SKU the demo's by-hand lines order from.
const demoSKU = "DEMO-CUP"

// demo is `stockflow up`, then three lines to try by hand, then a flash sale with defaults. The
// system stays up afterwards (`stockflow down` stops it).
func demo(ctx context.Context, o launcher.Options, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := flashSaleFlags("demo", args, getenv, stderr)
	if err != nil {
		return err
	}
	sys, err := launcher.UpSupervised(ctx, o)
	if err != nil {
		return err
	}
	printUp(stdout, sys)
	cfg.OrderURL, cfg.StockURL, cfg.PaymentURL = sys.URLs["order"], sys.URLs["stock"], sys.URLs["payment-adapter"]
	cfg.PaysimURL = sys.PaysimURL
	if cfg.Signer, err = launcher.Signer(o); err != nil {
		return err
	}
	ops, err := launcher.Token(o, "demo-ops", []auth.Role{auth.Operator, auth.Viewer}, 12*time.Hour)
	if err != nil {
		return err
	}
	buyer, err := launcher.Token(o, "you", []auth.Role{auth.Buyer}, 12*time.Hour)
	if err != nil {
		return err
	}
	if err := ensureDemoSKU(ctx, cfg.StockURL, cfg.OrderURL, ops); err != nil {
		return err
	}
	fmt.Fprint(stdout, tryByHand(sys.URLs, cfg.SandboxSecret, ops, buyer))
	return runSale(ctx, cfg, stdout, stderr)
}

// tryByHand is copy-pasteable shell lines: two tokens from the local identity provider, place
// an order, pay it through the sandbox provider's signed callback, read the SKU.
func tryByHand(urls map[string]string, secret, ops, buyer string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nTry it by hand (%s has 100 units). Every call but the signed callback needs a bearer token;\n", demoSKU)
	fmt.Fprintf(&b, "these two last 12 h (go run ./tools/cmd/stockflow token -role operator -sub alice mints others):\n\n")
	fmt.Fprintf(&b, "  BUYER='%s'\n  OPS='%s'\n\n", buyer, ops)
	fmt.Fprintf(&b, "  # 1. place an order as buyer \"you\": 2 x 49.00 CNY, the order service's price; the order id goes into $ORDER\n")
	fmt.Fprintf(&b, "  ORDER=$(curl -s -XPOST %s/v1/orders -H \"Authorization: Bearer $BUYER\" -H \"Idempotency-Key: demo-$(date +%%s%%N)\" -d '{\"buyer_id\":\"you\",\"items\":[{\"sku\":\"%s\",\"qty\":2}]}' | sed -E 's/.*\"order_id\":\"([^\"]+)\".*/\\1/'); echo $ORDER\n\n",
		urls["order"], demoSKU)
	fmt.Fprintf(&b, "  # 2. pay it: the sandbox provider signs the raw body with HMAC-SHA256 (openssl computes the signature)\n")
	fmt.Fprintf(&b, "  BODY='{\"provider_txn_id\":\"txn-'$ORDER'\",\"order_id\":\"'$ORDER'\",\"amount\":9800,\"currency\":\"CNY\",\"status\":\"succeeded\"}'; curl -s -XPOST %s/v1/callbacks/sandbox -H \"X-Sandbox-Signature: $(printf %%s \"$BODY\" | openssl dgst -sha256 -hmac '%s' | sed 's/^.* //')\" -d \"$BODY\"\n\n",
		urls["payment-adapter"], secret)
	fmt.Fprintf(&b, "  # 3. read the SKU (2 sold) as operator, and the order (paid) as its buyer\n")
	fmt.Fprintf(&b, "  curl -s %s/v1/skus/%s -H \"Authorization: Bearer $OPS\"; curl -s %s/v1/orders/$ORDER -H \"Authorization: Bearer $BUYER\"\n\n", urls["stock"], demoSKU, urls["order"])
	fmt.Fprintf(&b, "Now a flash sale (stockflow flashsale -h for its knobs; stockflow down stops everything):\n")
	return b.String()
}

// ensureDemoSKU creates the by-hand SKU in stock (one left by an earlier demo is fine) and
// puts it on sale at 49.00 CNY on the order service, as operator ops.
func ensureDemoSKU(ctx context.Context, stockURL, orderURL, ops string) error {
	if err := opsCall(ctx, "create "+demoSKU, http.MethodPost, stockURL+"/v1/skus", `{"sku":"`+demoSKU+`","on_hand":100}`, ops,
		http.StatusCreated, http.StatusConflict); err != nil {
		return err
	}
	return opsCall(ctx, "price "+demoSKU, http.MethodPut, orderURL+"/v1/prices/"+demoSKU, `{"unit_price":4900,"currency":"CNY"}`, ops,
		http.StatusOK)
}

// opsCall sends body as operator ops and wants one of the statuses ok.
func opsCall(ctx context.Context, op, method, url, body, ops string, ok ...int) error {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ops)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	if !slices.Contains(ok, resp.StatusCode) {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: HTTP %d %s", op, resp.StatusCode, raw)
	}
	return nil
}
