# go_modules prints the repository's Go modules, "." first (sourced): the SDK,
# and the ones that keep heavy dependencies (x/tools, fault-injection tooling,
# benchmark peers) out of the SDK's graph. Test data modules are not among them.
go_modules() {
  echo .
  git ls-files -- '*/go.mod' 2>/dev/null | grep -v '/testdata/' | xargs -rn1 dirname | sort
}
