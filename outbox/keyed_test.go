package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/outbox"
)

// The core refuses a Config with neither or both senders, and a Lanes below 1.
func TestKeyedConfigValidation(t *testing.T) {
	send := func(context.Context, outbox.Message) error { return nil }
	batch := func(context.Context, []outbox.Message) []error { return nil }
	for name, cfg := range map[string]outbox.KeyedConfig{
		"neither": {},
		"both":    {Send: send, SendBatch: batch},
		"lanes":   {Send: send, Lanes: -1},
	} {
		if _, err := outbox.NewKeyedPublisher(cfg); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

// Waves: a message Admit sends to the next wave goes there, after its key's
// earlier message was answered; when the first message of a key in a wave asks
// for the next wave it joins this one instead (a wave always makes progress).
func TestKeyedWavesFollowAdmit(t *testing.T) {
	var waves [][]string
	p, err := outbox.NewKeyedPublisher(outbox.KeyedConfig{
		SendBatch: func(_ context.Context, msgs []outbox.Message) []error {
			var w []string
			for _, m := range msgs {
				w = append(w, m.Key+m.Type)
			}
			waves = append(waves, w)
			return nil
		},
		Admit: func(m outbox.Message, prev *outbox.Message) (outbox.Admission, error) {
			if m.Type == "2" {
				return outbox.AdmitNext, nil
			}
			return outbox.AdmitJoin, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(key, typ string) outbox.Message {
		return outbox.Message{ID: outbox.NewID(time.Now()), Key: key, Type: typ}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if errs := p.Publish(ctx, []outbox.Message{msg("a", "1"), msg("b", "2"), msg("a", "2"), msg("a", "3")}); errs != nil {
		t.Fatalf("Publish: %v", errs)
	}
	if len(waves) != 2 || len(waves[0]) != 2 || waves[0][0] != "a1" || waves[0][1] != "b2" || len(waves[1]) != 2 || waves[1][0] != "a2" || waves[1][1] != "a3" {
		t.Fatalf("waves %v, want [[a1 b2] [a2 a3]]", waves)
	}
}
