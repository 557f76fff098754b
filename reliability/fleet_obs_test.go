package reliability

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
)

// What the fleet's worker processes logged (see reliability/internal/fleetworker).

// fleetObs is one state delivered to a subscriber.
type fleetObs struct {
	ns      int64
	rev     int64 // -1: the API gives none (naming/endpoints)
	state   string
	changes []fleetChange
	init    bool // the state read at the start (Get), not one delivered
}

type fleetChange struct {
	key string
	rev int64
	del bool
}

// fleetSub is one subscriber of one process.
type fleetSub struct {
	id     string // process/sub
	rng    string
	prefix bool
	obs    []fleetObs
}

// fleetMetric is one M line: the watch plane's counters in one process.
type fleetMetric struct {
	ns                               int64
	opens, relists, resyncs, up, sub int64
}

// fleetSent is one W line: what one process's client sent etcd so far.
type fleetSent struct {
	ns                                 int64
	creates, cancels, progress, ranges int64
}

// fleetSession is one L line: the leases' session held or lost.
type fleetSession struct {
	ns   int64
	held bool
}

// fleetLog follows one worker's log file.
type fleetLog struct {
	proc     string
	path     string
	off      int64
	partial  []byte
	subs     map[string]*fleetSub
	order    []string
	metrics  []fleetMetric
	sent     []fleetSent
	sessions []fleetSession
	errs     []string
	bad      []string // lines that do not parse
}

func newFleetLog(proc, path string) *fleetLog {
	return &fleetLog{proc: proc, path: path, subs: map[string]*fleetSub{}}
}

// read parses what was appended since the last read.
func (l *fleetLog) read() error {
	f, err := os.Open(l.path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	l.off += int64(len(b))
	b = append(l.partial, b...)
	last := bytes.LastIndexByte(b, '\n')
	if last < 0 {
		l.partial = b
		return nil
	}
	l.partial = append([]byte(nil), b[last+1:]...)
	for _, line := range strings.Split(string(b[:last]), "\n") {
		l.parse(line)
	}
	return nil
}

func (l *fleetLog) parse(line string) {
	f := strings.Fields(line)
	bad := func() { l.bad = append(l.bad, line) }
	if len(f) == 0 {
		return
	}
	switch f[0] {
	case "R":
		if len(f) != 4 {
			bad()
			return
		}
		l.subs[f[1]] = &fleetSub{id: l.proc + "/" + f[1], rng: f[3], prefix: f[2] == "prefix"}
		l.order = append(l.order, f[1])
	case "S":
		s := l.subs[f[1]]
		if len(f) != 6 || s == nil {
			bad()
			return
		}
		ns, err1 := strconv.ParseInt(f[2], 10, 64)
		rev, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			bad()
			return
		}
		o := fleetObs{ns: ns, rev: rev, state: f[4], init: f[5] == "init"}
		if f[5] != "-" && !o.init {
			for _, c := range strings.Split(f[5], ",") {
				at := strings.LastIndexByte(c, '@')
				if at < 0 {
					bad()
					return
				}
				ch := fleetChange{key: c[:at]}
				num := c[at+1:]
				if ch.del = strings.HasSuffix(num, "!"); ch.del {
					num = num[:len(num)-1]
				}
				if ch.rev, err1 = strconv.ParseInt(num, 10, 64); err1 != nil {
					bad()
					return
				}
				o.changes = append(o.changes, ch)
			}
		}
		s.obs = append(s.obs, o)
	case "M":
		v, ok := fleetInts(f, 6)
		if !ok {
			bad()
			return
		}
		l.metrics = append(l.metrics, fleetMetric{v[0], v[1], v[2], v[3], v[4], v[5]})
	case "W":
		v, ok := fleetInts(f, 5)
		if !ok {
			bad()
			return
		}
		l.sent = append(l.sent, fleetSent{v[0], v[1], v[2], v[3], v[4]})
	case "L":
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if len(f) != 3 || err != nil {
			bad()
			return
		}
		l.sessions = append(l.sessions, fleetSession{ns: ns, held: f[2] == "held"})
	case "E":
		l.errs = append(l.errs, line)
	default:
		bad()
	}
}

// metricAt returns the last M line at or before ns (zero before the first).
func (l *fleetLog) metricAt(ns int64) fleetMetric {
	return lastAt(l.metrics, ns, func(m fleetMetric) int64 { return m.ns })
}

// sentAt returns the last W line at or before ns (zero before the first).
func (l *fleetLog) sentAt(ns int64) fleetSent {
	return lastAt(l.sent, ns, func(s fleetSent) int64 { return s.ns })
}

// lastAt returns the last of lines (in the order of their time, at) at or
// before ns: the zero line before the first.
func lastAt[T any](lines []T, ns int64, at func(T) int64) T {
	var last T
	for _, x := range lines {
		if at(x) > ns {
			break
		}
		last = x
	}
	return last
}

// fleetInts parses the n integers that follow a line's tag; ok is false when
// the line has another number of fields or one is not an integer.
func fleetInts(f []string, n int) (v []int64, ok bool) {
	if len(f) != n+1 {
		return nil, false
	}
	v = make([]int64, n)
	for i := range v {
		x, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return nil, false
		}
		v[i] = x
	}
	return v, true
}
