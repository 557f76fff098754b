package schedule

import "time"

// Preview returns the next n scheduled fires of j after instant after, in
// order, under its DST policies: the identities and nominal instants its
// schedulers will fire (catch-up and operators aside). Handler may be nil. It
// does not block. It returns a *JobError for an invalid job.
func Preview(j Job, after time.Time, n int) ([]Fire, error) {
	if j.Handler == nil {
		j.Handler = nopHandler
	}
	nj, err := newJob(j)
	if err != nil {
		return nil, err
	}
	var out []Fire
	for o, ok := nj.spec.next(after); ok && len(out) < n; o, ok = nj.spec.next(o.nominal) {
		out = append(out, Fire{ID: ID{Job: j.Name, Local: o.local, Fold: o.fold}, Nominal: o.nominal, Kind: KindScheduled})
	}
	return out, nil
}
