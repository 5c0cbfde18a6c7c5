# Sourced by the bench scripts (not run on its own).
#
# FLEETGATE_BENCH_PROFILE picks the build a bench runs: `release` (the default; every figure in
# BENCHMARKS.md) or `dev`, the debug build `scripts/test` has already made, for the short smoke
# of each bench in CI (scripts/bench-smoke): its figures mean nothing, the path it walks does.
bench_profile="${FLEETGATE_BENCH_PROFILE:-release}"
case "$bench_profile" in
  release) bench_out="${CARGO_TARGET_DIR:-target}/release" ;;
  dev) bench_out="${CARGO_TARGET_DIR:-target}/debug" ;;
  *) echo "FLEETGATE_BENCH_PROFILE is '$bench_profile': it must be release or dev" >&2; exit 2 ;;
esac

# Build what a bench runs (cargo build arguments: -p …, --example …, --bin …). Under `dev` the
# whole workspace, as scripts/test builds it: the same feature set, so nothing is rebuilt.
bench_build() {
  if [[ "$bench_profile" == dev ]]; then
    cargo build -q --locked --workspace --all-targets
  else
    cargo build --release -q --locked "$@"
  fi
}
