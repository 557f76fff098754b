package outbox

import "time"

// ForceSolo and ForceKeyed fix how r claims (claim.go): tests of the keyed
// claim's races need it whatever the lease says; a relay left alone chooses.
func ForceSolo(r *Relay)  { r.mode = modeSolo }
func ForceKeyed(r *Relay) { r.mode = modeKeyed }

// SetSoloPause shortens how long r works keyed after it found the lease held.
func SetSoloPause(r *Relay, d time.Duration) { r.soloPause = d }
