package nodoc

// Thing is documented, but the package is not.
type Thing struct{}
