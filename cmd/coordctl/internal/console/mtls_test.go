package console_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/console"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// pki is a throwaway CA with a server and a client certificate.
type pki struct {
	pool           *x509.CertPool
	server, client tls.Certificate
}

func newPKI(t *testing.T, clientCN string) pki {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coordctl test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) tls.Certificate {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	p := pki{pool: x509.NewCertPool(), server: leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth), client: leaf(3, clientCN, x509.ExtKeyUsageClientAuth)}
	p.pool.AddCert(ca)
	return p
}

// TestMTLS: with --client-ca the console (here on every interface, which needs
// a guard) refuses a client without a certificate at the TLS handshake, serves
// one with a certificate of the CA, and records its CN as the audit actor.
func TestMTLS(t *testing.T) {
	e := testenv.Seeded(t)
	p := newPKI(t, "dave@oncall")
	base := serve(t, e, console.Config{Listen: "0.0.0.0:0", TLS: &p.server, ClientCAs: p.pool, Actor: "unused"})
	base = "https://127.0.0.1:" + base[strings.LastIndex(base, ":")+1:]

	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool}}}
	if resp, err := anon.Get(base + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %d", resp.StatusCode)
	}
	c := client(t)
	c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}}}
	resp, page := get(t, c, base+"/sagas/"+testenv.StuckSaga, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "mtls:CN=dave@oncall") {
		t.Fatalf("with a client certificate: %d, actor shown: %v", resp.StatusCode, strings.Contains(page, "mtls:CN=dave@oncall"))
	}
	form := url.Values{"csrf": {csrfField.FindStringSubmatch(page)[1]}, "expect": {versionField.FindStringSubmatch(page)[1]}, "reason": {"via mTLS"}}
	if resp, body := post(t, c, base+"/sagas/"+testenv.StuckSaga+"/retry", form, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("retry over mTLS: %d %s", resp.StatusCode, body)
	}
	var actor string
	if err := e.DB.Pool.QueryRow(testenv.Ctx(t), `SELECT actor FROM coordctl_audit WHERE action = 'saga.retry'`).Scan(&actor); err != nil || actor != "mtls:CN=dave@oncall" {
		t.Fatalf("audit actor %q, %v; want the certificate's CN", actor, err)
	}
	if len(resp.Cookies()) == 0 {
		t.Fatal("the first page over TLS set no CSRF cookie")
	}
	for _, c := range resp.Cookies() {
		if !c.Secure {
			t.Errorf("cookie %s is not Secure over TLS", c.Name)
		}
	}
}
