package admin

import "github.com/coordkit/coordkit/cmd/coordctl/internal/audit"

// AuditEntry is one row of coordctl's audit table.
type AuditEntry = audit.Entry

func auditOpts(target string, limit int) audit.ListOpts {
	return audit.ListOpts{Target: target, Limit: limit}
}
