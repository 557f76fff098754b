package admin

import "github.com/coordkit/coordkit/cmd/coordctl/internal/audit"

// AuditEntry is one row of coordctl's audit table.
type AuditEntry = audit.Entry
