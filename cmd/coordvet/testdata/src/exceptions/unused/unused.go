package unused

func nothing() {
	//coordvet:ignore dualwrite owner=payments expires=2026-09-30 the dual write was fixed // want `dualwrite: unused exception`
	_ = 1
}
