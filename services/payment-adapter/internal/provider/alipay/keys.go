package alipay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// minKeyBits is the smallest RSA key accepted: RSA2 keys are RSA-2048.
const minKeyBits = 2048

// This file repeats, in a few lines, wechatpay's key parsing: the two providers share no
// package (each is its own adapter), and Alipay's keys come in one more form (bare base64).

// der returns the DER bytes and PEM type of a key given as PEM or, as Alipay's key tool and
// console hand keys out, as the bare base64 of the DER (type "").
func der(text string) ([]byte, string, error) {
	if block, _ := pem.Decode([]byte(text)); block != nil {
		return block.Bytes, block.Type, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), ""))
	if err != nil || len(b) == 0 {
		return nil, "", errors.New("neither PEM nor base64 DER")
	}
	return b, "", nil
}

// parsePrivateKey reads the app's RSA private key: PKCS #8 or PKCS #1.
func parsePrivateKey(text string) (*rsa.PrivateKey, error) {
	b, typ, err := der(text)
	if err != nil {
		return nil, err
	}
	var key any
	if key, err = x509.ParsePKCS8PrivateKey(b); err != nil && typ != "PRIVATE KEY" {
		key, err = x509.ParsePKCS1PrivateKey(b)
	}
	if err != nil {
		return nil, err
	}
	k, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an RSA private key", key)
	}
	return k, checkSize(&k.PublicKey)
}

// parsePublicKey reads the Alipay public key: PKIX (what the console shows) or PKCS #1.
// Certificate mode (alipay_cert_sn, alipay_root_cert_sn) is not supported.
func parsePublicKey(text string) (*rsa.PublicKey, error) {
	b, typ, err := der(text)
	if err != nil {
		return nil, err
	}
	var key any
	if key, err = x509.ParsePKIXPublicKey(b); err != nil && typ != "PUBLIC KEY" {
		key, err = x509.ParsePKCS1PublicKey(b)
	}
	if err != nil {
		return nil, err
	}
	k, ok := key.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an RSA public key", key)
	}
	return k, checkSize(k)
}

// checkSize refuses RSA keys shorter than minKeyBits.
func checkSize(k *rsa.PublicKey) error {
	if k.N.BitLen() < minKeyBits {
		return fmt.Errorf("RSA-%d, shorter than %d bits", k.N.BitLen(), minKeyBits)
	}
	return nil
}
