package vetutil

// DocURL is where every check is documented; each diagnostic and each SARIF
// rule links to its section (DocURL + "#" + check). It is absolute, so review
// bots can link it from anywhere.
const DocURL = "https://github.com/coordkit/coordkit/blob/main/docs/vet.md"

// Check is one coordvet check as a directive may name it.
type Check struct {
	Name string
	Rule string // the RFC rule it enforces, e.g. "MUST 2"
}

// Checks returns the checks a directive may name, in documentation order.
func Checks() []Check {
	return []Check{
		{"pavedroad", "MUST 3, 4"},
		{"fencetoken", "MUST 3"},
		{"forgedtoken", "MUST 3"},
		{"efficiencydecl", "MUST 4"},
		{"dualwrite", "MUST 2"},
		{"sagapivot", "MUST 5"},
		{"schedulefire", "MUST 1, 3"},
	}
}

// CheckNames returns the names of Checks.
func CheckNames() []string {
	var out []string
	for _, c := range Checks() {
		out = append(out, c.Name)
	}
	return out
}

// ruleOf returns the RFC rule of a check, or "Exceptions" for the directive
// check itself.
func ruleOf(check string) string {
	for _, c := range Checks() {
		if c.Name == check {
			return c.Rule
		}
	}
	return "Exceptions"
}

// Nearest returns the known check closest to name by edit distance, for a
// suggested fix of a typo, or "" if none is within two edits.
func Nearest(name string) string {
	best, bestD := "", 3
	for _, c := range CheckNames() {
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
