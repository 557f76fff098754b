package vetutil

import (
	"fmt"
	"os"
	"time"
)

// TodayEnv names the environment variable that sets "today" for exception
// expiry (YYYY-MM-DD). The coordvet command's -today flag sets it; without
// either, today is the local date of the clock. The coordvet binary puts the
// date it uses into its -V=full build ID, so go vet's result cache, keyed by
// that ID and the flags, never replays yesterday's verdict on an expiry.
const TodayEnv = "COORDVET_TODAY"

// Today returns the date exceptions are judged on: $COORDVET_TODAY if set,
// else the local date now. A malformed variable is an error, never ignored.
func Today() (time.Time, error) {
	if s := os.Getenv(TodayEnv); s != "" {
		t, err := time.Parse(DateLayout, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("coordvet: %s=%q: want a YYYY-MM-DD date", TodayEnv, s)
		}
		return t, nil
	}
	return civil(time.Now()), nil
}
