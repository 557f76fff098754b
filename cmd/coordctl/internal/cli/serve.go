package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/console"
)

func (a *app) serveCmd() *cobra.Command {
	var listen, token, tokenFile, tlsCert, tlsKey, clientCA string
	var refresh time.Duration
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the web console (loopback by default; any other address needs a token or mTLS)",
		Args:  args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := console.Config{Listen: listen, Token: token, Refresh: refresh, Actor: a.g.actor + " (console)", Logger: a.log}
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return usageError{fmt.Errorf("--token-file: %w", err)}
				}
				cfg.Token = strings.TrimSpace(string(b))
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
			if cfg.Token != "" && cfg.TLS == nil && !console.IsLoopback(cfg.Listen) {
				a.log.Warn("coordctl: the console token travels in clear text: serve over TLS (--tls-cert, --tls-key)")
			}
			s, err := console.New(a.adm, cfg)
			if err != nil {
				return usageError{err}
			}
			return s.Serve(cmd.Context(), nil)
		},
	}
	c.Flags().StringVar(&listen, "listen", console.DefaultListen, "address to listen on (env COORDCTL_LISTEN)")
	c.Flags().StringVar(&token, "token", "", "require this token (Authorization: Bearer, or the login form) (env COORDCTL_TOKEN)")
	c.Flags().StringVar(&tokenFile, "token-file", "", "read the token from this file")
	c.Flags().StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate")
	c.Flags().StringVar(&tlsKey, "tls-key", "", "and this key")
	c.Flags().StringVar(&clientCA, "client-ca", "", "require client certificates signed by this CA (mTLS)")
	c.Flags().DurationVar(&refresh, "refresh", console.DefaultRefresh, "how often live pages refresh")
	return c
}
