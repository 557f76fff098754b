package outbox

// ForceSolo and ForceKeyed fix how r claims (claim.go): tests of the keyed
// claim's races need it whatever the lease says; a relay left alone chooses.
func ForceSolo(r *Relay)  { r.mode = modeSolo }
func ForceKeyed(r *Relay) { r.mode = modeKeyed }
