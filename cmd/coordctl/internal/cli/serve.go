package cli

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/console"
)

func (a *app) serveCmd() *cobra.Command {
	var listen, token, tokenFile, tokensFile, tlsCert, tlsKey, clientCA, proxyHeader string
	var proxies []string
	var refresh time.Duration
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the web console (loopback by default; any other address needs tokens, mTLS or a trusted proxy)",
		Long: `Run the web console. Each operator should have an identity of their own — it is
what the audit rows record: per-user tokens (--tokens-file), the client
certificate's subject (--client-ca, mTLS), or the identity header of an
authenticating proxy in front (--proxy-header X-Forwarded-Email --trusted-proxy
10.0.0.5/32, e.g. oauth2-proxy). --token is one shared token: every user of it is
the same identity. Tokens shorter than 16 bytes, or empty, are refused.`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := console.Config{Listen: listen, Token: token, Refresh: refresh, Logger: a.log, ProxyHeader: proxyHeader,
				Actor: defaultActor() + " (loopback console)"}
			if cmd.Flags().Changed("token") && token == "" {
				return usageError{fmt.Errorf("--token is empty: %w", console.ErrWeakToken)}
			}
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return usageError{fmt.Errorf("--token-file: %w", err)}
				}
				if cfg.Token = strings.TrimSpace(string(b)); cfg.Token == "" {
					return usageError{fmt.Errorf("--token-file %s is empty: %w", tokenFile, console.ErrWeakToken)}
				}
			}
			if cfg.Token != "" {
				cfg.Actor = "shared token (console of " + defaultActor() + ")"
			}
			if tokensFile != "" {
				toks, err := readTokens(tokensFile)
				if err != nil {
					return usageError{err}
				}
				cfg.Tokens = toks
			}
			for _, p := range proxies {
				pfx, err := netip.ParsePrefix(p)
				if err != nil {
					addr, aerr := netip.ParseAddr(p)
					if aerr != nil {
						return usageError{fmt.Errorf("--trusted-proxy %q: want an address or a CIDR: %w", p, err)}
					}
					pfx = netip.PrefixFrom(addr, addr.BitLen())
				}
				cfg.TrustedProxies = append(cfg.TrustedProxies, pfx)
			}
			if tlsCert != "" || tlsKey != "" {
				pair, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
				if err != nil {
					return usageError{fmt.Errorf("--tls-cert/--tls-key: %w", err)}
				}
				cfg.TLS = &pair
			}
			if clientCA != "" {
				pem, err := os.ReadFile(clientCA)
				if err != nil {
					return usageError{fmt.Errorf("--client-ca: %w", err)}
				}
				cfg.ClientCAs = x509.NewCertPool()
				if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
					return usageError{fmt.Errorf("--client-ca %s: no certificate in it", clientCA)}
				}
			}
			if (cfg.Token != "" || len(cfg.Tokens) > 0) && cfg.TLS == nil && !console.IsLoopback(cfg.Listen) {
				a.log.Warn("coordctl: the console tokens travel in clear text: serve over TLS (--tls-cert, --tls-key)")
			}
			s, err := console.New(a.adm, cfg)
			if err != nil {
				return usageError{err}
			}
			return s.Serve(cmd.Context(), nil)
		},
	}
	c.Flags().StringVar(&listen, "listen", console.DefaultListen, "address to listen on (env COORDCTL_LISTEN)")
	c.Flags().StringVar(&tokensFile, "tokens-file", "", "per-user tokens: one \"USER TOKEN\" per line (# comments); the user is the audit rows' actor")
	c.Flags().StringVar(&token, "token", "", "one shared token, at least 16 bytes (every user of it is one identity) (env COORDCTL_TOKEN)")
	c.Flags().StringVar(&tokenFile, "token-file", "", "read the shared token from this file")
	c.Flags().StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate")
	c.Flags().StringVar(&tlsKey, "tls-key", "", "and this key")
	c.Flags().StringVar(&clientCA, "client-ca", "", "require client certificates signed by this CA (mTLS); the subject is the actor")
	c.Flags().StringVar(&proxyHeader, "proxy-header", "", "identity header set by an authenticating proxy in front (X-Forwarded-Email for oauth2-proxy)")
	c.Flags().StringSliceVar(&proxies, "trusted-proxy", nil, "addresses (or CIDRs) of that proxy: only they may set --proxy-header")
	c.Flags().DurationVar(&refresh, "refresh", console.DefaultRefresh, "how often live pages refresh")
	return c
}

// readTokens reads a --tokens-file: "USER TOKEN" per line, blank lines and #
// comments skipped.
func readTokens(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tokens-file: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("--tokens-file %s:%d: want \"USER TOKEN\"", path, n)
		}
		if _, dup := out[f[1]]; dup {
			return nil, fmt.Errorf("--tokens-file %s:%d: the token of %s is also another user's", path, n, f[0])
		}
		out[f[1]] = f[0]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--tokens-file %s has no token: %w", path, console.ErrWeakToken)
	}
	return out, sc.Err()
}
