package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/idempotency"
)

// The crash test re-executes the test binary as a worker that runs a phased payment
// and stops dead at a crash point, where the parent kills it.
const (
	workerEnv   = "IDEMPOTENCY_TEST_WORKER" // crash point: "after-charge" or "in-finish"
	workerDB    = "IDEMPOTENCY_TEST_DB"
	workerPSP   = "IDEMPOTENCY_TEST_PSP"
	workerKey   = "IDEMPOTENCY_TEST_KEY"
	workerReady = "WORKER AT CRASH POINT"
)

// paymentOp is a phased payment: create the order (local, in a transaction), charge
// the provider (external, with the idempotency key), record the charge and answer.
// crash, when set, is called at the crash point named.
func paymentOp(pspURL string, crash func(point string)) *idempotency.Operation {
	if crash == nil {
		crash = func(string) {}
	}
	return &idempotency.Operation{
		Name: "payment",
		Phases: []idempotency.Phase{
			{Name: "order_created", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
				_, err := tx.Exec(ctx, `INSERT INTO orders (key, amount) VALUES ($1, $2)`, st.Key.ID, string(st.Request))
				return err
			}},
			{Name: "charged", External: func(ctx context.Context, st *idempotency.State) error {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, pspURL, strings.NewReader(string(st.Request)))
				if err != nil {
					return err
				}
				req.Header.Set("Idempotency-Key", `"`+st.Key.ID+`"`)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != 200 {
					return fmt.Errorf("psp: %d %s %v", resp.StatusCode, b, err)
				}
				st.Data = b // the charge id
				crash("after-charge")
				return nil
			}},
			{Name: "finished", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
				if _, err := tx.Exec(ctx, `UPDATE orders SET charge = $2 WHERE key = $1`, st.Key.ID, string(st.Data)); err != nil {
					return err
				}
				crash("in-finish")
				st.Response = &idempotency.Response{Status: 201, Body: []byte(`{"charge":"` + string(st.Data) + `"}`)}
				return nil
			}},
		},
	}
}

func runWorker() int {
	point := os.Getenv(workerEnv)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(workerDB))
	if err != nil {
		fmt.Println("worker:", err)
		return 2
	}
	defer pool.Close()
	s, err := idempotency.New(pool, idempotency.Config{LockTimeout: crashLock})
	if err != nil {
		fmt.Println("worker:", err)
		return 2
	}
	op := paymentOp(os.Getenv(workerPSP), func(p string) {
		if p == point {
			fmt.Println(workerReady)
			time.Sleep(time.Hour) // the parent kills us here
		}
	})
	key := idempotency.Key{Scope: "acme", ID: os.Getenv(workerKey)}
	_, err = s.Run(ctx, key, idempotency.FingerprintOf([]byte("pay 100")), op, []byte("100"))
	fmt.Println("worker finished:", err)
	return 1
}
