# lib.sh: sourced by the tests/slurm scripts (README.md "The local Slurm cluster"). Defines
# fail, a work dir removed on exit, and slurm_up, which brings the local cluster of
# tools/slurm-up up when it is down (and then stops it on exit) or uses the one that is up.
# Expects $root (the repo) and $name (the script's name). Skips (77) only when Slurm is not
# installed and cannot be.
set -uo pipefail
export LC_ALL=C TZ=UTC
state=${BALPLAN_SLURM_DIR:-$root/build-slurm}
fail() { echo "$name: FAIL: $*" >&2; exit 1; }

started=0
work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX") || fail "mktemp"
cleanup() {
  rm -rf "$work"
  [ "$started" -eq 0 ] || "$root/tools/slurm-down" >&2 || echo "$name: slurm-down failed" >&2
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

slurm_up() {
  if ! command -v slurmctld >/dev/null || ! command -v mpicc >/dev/null; then
    "$root/tools/deps-slurm" >&2 || true
    command -v slurmctld >/dev/null || { echo "$name: SKIP: no slurmctld" >&2; exit 77; }
  fi
  local b out pid
  for b in slurmd srun mpicc munged; do
    command -v "$b" >/dev/null || fail "'$b' missing although slurmctld is installed"
  done
  # Decide ownership before starting, so a signal during tools/slurm-up still tears it down.
  pid=$(cat "$state/run/slurmctld.pid" 2>/dev/null) && [ -n "$pid" ] && [ -d "/proc/$pid" ] ||
    started=1
  out=$("$root/tools/slurm-up" 2>&1) || { echo "$out" >&2; fail "tools/slurm-up"; }
  echo "$out" | grep -v '^export ' >&2
  eval "$(echo "$out" | grep '^export SLURM_CONF=')"
  [ -n "${SLURM_CONF:-}" ] || fail "tools/slurm-up printed no SLURM_CONF"
  echo "$name: cluster $state (started here: $started)"
  # Open MPI inside a container: shared memory and loopback only, no fabric probing.
  export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
}
