package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stockflow/stockflow/services/payment-adapter/internal/payment"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/alipay"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/sandbox"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/stripe"
	"github.com/stockflow/stockflow/services/payment-adapter/internal/provider/wechatpay"
)

// Stripe is the Stripe provider's settings. Stripe is on when PAYMENT_STRIPE_API_KEY and
// PAYMENT_STRIPE_WEBHOOK_SECRET are set.
type Stripe struct {
	// StripeAPIKey is the secret (sk_…) or restricted (rk_…) API key refunds and payment
	// queries are made with. Masked in logs.
	StripeAPIKey string `env:"PAYMENT_STRIPE_API_KEY" secret:"true"`
	// StripeWebhookSecret is the webhook endpoint's signing secret (whsec_…) that
	// Stripe-Signature is checked with. Masked in logs.
	StripeWebhookSecret string `env:"PAYMENT_STRIPE_WEBHOOK_SECRET" secret:"true"`
	// StripeAPIURL is Stripe's API base URL; empty is https://api.stripe.com. A provider
	// simulator or a test double is pointed at here.
	StripeAPIURL string `env:"PAYMENT_STRIPE_API_URL"`
}

// WeChatPay is the WeChat Pay (API v3, direct merchant) provider's settings. WeChat Pay is on
// when every one but PAYMENT_WECHATPAY_BASE_URL is set. PEM texts may come with their line
// breaks written as \n (one line, as some secret stores keep them).
type WeChatPay struct {
	// WeChatPayMchID is the merchant id (mchid).
	WeChatPayMchID string `env:"PAYMENT_WECHATPAY_MCH_ID"`
	// WeChatPayAppID is the app id payments are made under (appid).
	WeChatPayAppID string `env:"PAYMENT_WECHATPAY_APP_ID"`
	// WeChatPayMerchantSerialNo is the serial number of the merchant's API certificate.
	WeChatPayMerchantSerialNo string `env:"PAYMENT_WECHATPAY_MERCHANT_SERIAL_NO"`
	// WeChatPayMerchantPrivateKey is the merchant's RSA private key, the PEM text of
	// apiclient_key.pem. Masked in logs.
	WeChatPayMerchantPrivateKey string `env:"PAYMENT_WECHATPAY_MERCHANT_PRIVATE_KEY" secret:"true"`
	// WeChatPayAPIv3Key is the 32-byte APIv3 key callbacks are sealed with. Masked in logs.
	WeChatPayAPIv3Key string `env:"PAYMENT_WECHATPAY_APIV3_KEY" secret:"true"`
	// WeChatPayPlatformPublicKeyID is the Wechatpay-Serial WeChat Pay signs under: a
	// public-key id PUB_KEY_ID_… or a platform certificate's serial number.
	WeChatPayPlatformPublicKeyID string `env:"PAYMENT_WECHATPAY_PLATFORM_PUBLIC_KEY_ID"`
	// WeChatPayPlatformPublicKey is the PEM text of that key: WeChat Pay's public key, or the
	// platform certificate. One key: a rotation is a restart with the new id and key.
	WeChatPayPlatformPublicKey string `env:"PAYMENT_WECHATPAY_PLATFORM_PUBLIC_KEY"`
	// WeChatPayBaseURL is the API v3 base URL; empty is https://api.mch.weixin.qq.com.
	WeChatPayBaseURL string `env:"PAYMENT_WECHATPAY_BASE_URL"`
}

// Alipay is the Alipay (open platform, RSA2 public-key mode) provider's settings. Alipay is on
// when PAYMENT_ALIPAY_APP_ID, PAYMENT_ALIPAY_APP_PRIVATE_KEY and PAYMENT_ALIPAY_PUBLIC_KEY are
// set.
type Alipay struct {
	// AlipayAppID is the app's id (app_id).
	AlipayAppID string `env:"PAYMENT_ALIPAY_APP_ID"`
	// AlipayAppPrivateKey is the app's RSA private key: PEM, or the bare base64 Alipay's key
	// tool writes. Masked in logs.
	AlipayAppPrivateKey string `env:"PAYMENT_ALIPAY_APP_PRIVATE_KEY" secret:"true"`
	// AlipayPublicKey is Alipay's public key for the app (PEM or bare base64); certificate mode
	// is not supported.
	AlipayPublicKey string `env:"PAYMENT_ALIPAY_PUBLIC_KEY"`
	// AlipayGatewayURL is the gateway; empty is https://openapi.alipay.com/gateway.do.
	AlipayGatewayURL string `env:"PAYMENT_ALIPAY_GATEWAY_URL"`
	// AlipaySellerID, when set, is the seller (PID, 2088…) every notification must be for.
	AlipaySellerID string `env:"PAYMENT_ALIPAY_SELLER_ID"`
}

// setting is one required environment variable of a provider and its value.
type setting struct{ name, value string }

// on reports whether the provider called name is configured: every one of its required
// settings set. None set is off; some but not all is an error naming the missing ones.
func on(name string, required ...setting) (bool, error) {
	var missing []string
	for _, s := range required {
		if s.value == "" {
			missing = append(missing, s.name)
		}
	}
	switch len(missing) {
	case 0:
		return true, nil
	case len(required):
		return false, nil
	}
	return false, fmt.Errorf("%s is configured in part: %s missing (set all of its settings, or none)", name, strings.Join(missing, ", "))
}

// StripeConfig returns the Stripe provider's configuration; ok is false when Stripe is off.
func (c Config) StripeConfig() (cfg stripe.Config, ok bool, err error) {
	ok, err = on("Stripe", setting{"PAYMENT_STRIPE_API_KEY", c.StripeAPIKey}, setting{"PAYMENT_STRIPE_WEBHOOK_SECRET", c.StripeWebhookSecret})
	if !ok {
		return stripe.Config{}, false, err
	}
	return stripe.Config{APIKey: c.StripeAPIKey, WebhookSecret: c.StripeWebhookSecret, APIURL: c.StripeAPIURL}, true, nil
}

// WeChatPayConfig returns the WeChat Pay provider's configuration; ok is false when WeChat Pay
// is off.
func (c Config) WeChatPayConfig() (cfg wechatpay.Config, ok bool, err error) {
	ok, err = on("WeChat Pay",
		setting{"PAYMENT_WECHATPAY_MCH_ID", c.WeChatPayMchID},
		setting{"PAYMENT_WECHATPAY_APP_ID", c.WeChatPayAppID},
		setting{"PAYMENT_WECHATPAY_MERCHANT_SERIAL_NO", c.WeChatPayMerchantSerialNo},
		setting{"PAYMENT_WECHATPAY_MERCHANT_PRIVATE_KEY", c.WeChatPayMerchantPrivateKey},
		setting{"PAYMENT_WECHATPAY_APIV3_KEY", c.WeChatPayAPIv3Key},
		setting{"PAYMENT_WECHATPAY_PLATFORM_PUBLIC_KEY_ID", c.WeChatPayPlatformPublicKeyID},
		setting{"PAYMENT_WECHATPAY_PLATFORM_PUBLIC_KEY", c.WeChatPayPlatformPublicKey})
	if !ok {
		return wechatpay.Config{}, false, err
	}
	return wechatpay.Config{
		MchID: c.WeChatPayMchID, AppID: c.WeChatPayAppID, MerchantSerialNo: c.WeChatPayMerchantSerialNo,
		MerchantPrivateKeyPEM: pemText(c.WeChatPayMerchantPrivateKey), APIv3Key: c.WeChatPayAPIv3Key,
		PlatformPublicKeys: map[string]string{c.WeChatPayPlatformPublicKeyID: pemText(c.WeChatPayPlatformPublicKey)},
		BaseURL:            c.WeChatPayBaseURL,
	}, true, nil
}

// AlipayConfig returns the Alipay provider's configuration; ok is false when Alipay is off.
func (c Config) AlipayConfig() (cfg alipay.Config, ok bool, err error) {
	ok, err = on("Alipay",
		setting{"PAYMENT_ALIPAY_APP_ID", c.AlipayAppID},
		setting{"PAYMENT_ALIPAY_APP_PRIVATE_KEY", c.AlipayAppPrivateKey},
		setting{"PAYMENT_ALIPAY_PUBLIC_KEY", c.AlipayPublicKey})
	if !ok {
		return alipay.Config{}, false, err
	}
	return alipay.Config{
		AppID: c.AlipayAppID, AppPrivateKeyPEM: pemText(c.AlipayAppPrivateKey), AlipayPublicKeyPEM: pemText(c.AlipayPublicKey),
		GatewayURL: c.AlipayGatewayURL, SellerID: c.AlipaySellerID,
	}, true, nil
}

// RealProviders builds every configured provider but the sandbox — Stripe, WeChat Pay, Alipay,
// in that order — with its package's New, so a key that does not parse, a secret of the wrong
// form or a bad URL is an error here, at startup, naming the provider's variables. Validate
// calls it; wire registers what it returns.
func (c Config) RealProviders() ([]payment.Provider, error) {
	var ps []payment.Provider
	var errs []error
	add := func(prefix string, p payment.Provider, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s*: %w", prefix, err))
			return
		}
		ps = append(ps, p)
	}
	if sc, ok, err := c.StripeConfig(); err != nil {
		errs = append(errs, err)
	} else if ok {
		p, err := stripe.New(sc)
		add("PAYMENT_STRIPE_", p, err)
	}
	if wc, ok, err := c.WeChatPayConfig(); err != nil {
		errs = append(errs, err)
	} else if ok {
		p, err := wechatpay.New(wc)
		add("PAYMENT_WECHATPAY_", p, err)
	}
	if ac, ok, err := c.AlipayConfig(); err != nil {
		errs = append(errs, err)
	} else if ok {
		p, err := alipay.New(ac)
		add("PAYMENT_ALIPAY_", p, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ps, nil
}

// Providers returns the sandbox (always on: local runs and the demo sign with it) and every
// configured real provider (RealProviders).
func (c Config) Providers() ([]payment.Provider, error) {
	sb, err := sandbox.New(c.SandboxSecret)
	if err != nil {
		return nil, fmt.Errorf("PAYMENT_SANDBOX_SECRET: %w", err)
	}
	more, err := c.RealProviders()
	if err != nil {
		return nil, err
	}
	return append([]payment.Provider{sb}, more...), nil
}

// pemText restores the line breaks of a PEM text given on one line with \n written out.
func pemText(s string) string {
	if strings.Contains(s, "\n") || !strings.Contains(s, `\n`) {
		return s
	}
	return strings.ReplaceAll(s, `\n`, "\n")
}
