package badfeature

// Options is the shape the house does not use.
type Options struct{}

// defaultStore is a package-level default instance: state.
var defaultStore = func() *Store { s, _ := New(Config{}); return s }()

// hits is a package-level map: state.
var hits = map[string]int{}

// NewFromPointer takes its Config by pointer.
func NewFromPointer(cfg *Config) (*Store, error) { return New(*cfg) }

// Legacy takes Options.
func Legacy(o Options) {}
