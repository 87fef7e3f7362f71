package wechatpay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// minKeyBits is the smallest RSA key accepted: WeChat Pay's keys are RSA-2048.
const minKeyBits = 2048

// parsePrivateKey reads the merchant's RSA private key: a PEM block of PKCS #8 ("PRIVATE KEY",
// what WeChat Pay's certificate tool writes to apiclient_key.pem) or PKCS #1 ("RSA PRIVATE KEY").
func parsePrivateKey(text string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	if block.Type == "RSA PRIVATE KEY" {
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	} else {
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
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

// parsePlatformKey reads one of WeChat Pay's verification keys, filed under serial: a platform
// certificate ("CERTIFICATE", whose serial number must be serial) or, for the newer
// public-key mode (serial "PUB_KEY_ID_…"), a PKIX ("PUBLIC KEY") or PKCS #1 ("RSA PUBLIC KEY")
// public key. The certificate's validity dates are not checked: WeChat Pay says which key it
// signs with through Wechatpay-Serial, and a rotation is done by configuring the new serial.
func parsePlatformKey(serial, text string) (*rsa.PublicKey, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
			if got := fmt.Sprintf("%X", cert.SerialNumber); !strings.EqualFold(got, serial) {
				return nil, fmt.Errorf("the certificate's serial number is %s, not %s", got, serial)
			}
		}
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
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
