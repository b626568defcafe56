#!/bin/bash
# Issue 28's bench on a many-core machine that has no build tools: this tree's wirebench (and,
# optionally, a baseline build) against upstream iperf3, sockperf and quinn-perf, all carried
# in target/devbench (ignored by git), with the C libraries they were built against, so the
# machine needs only bash, python3 and a Linux kernel.
#
#   bench/many-cores.sh prepare [BASELINE_WIREBENCH]   # here: after `cargo build --release`
#                                                      # and `cargo build --release --example quic_floor`
#   bash bench/many-cores.sh run                       # there, with target/devbench carried
#
# prepare takes iperf3 from $IPERF3 (default the one on PATH; the --gsro rows need 3.21+, built
# from esnet/iperf: ./configure --disable-shared && make), quinn-perf from
# $QUINN_SRC/target/release/quinn-perf (default /work/tools/quinn-src) and sockperf from PATH.
# run writes new.txt/new.json (this tree), base.txt/base.json (the baseline, when carried) and
# quic1.txt (QUIC with the server's runtime on one worker, TOKIO_WORKER_THREADS=1) under $OUT
# (default /tmp/out); each pass has a time limit (T_NEW, T_BASE, T_Q1 seconds; T_Q1=0 skips
# that pass), rows as ONLY_NEW / ONLY_BASE / ONLY_Q1 (bench/compare.py --only), PAIRS A/B pairs
# (default 3).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
D="$ROOT/target/devbench"

prepare() {
  local base=${1:-}
  mkdir -p "$D/real" "$D/lib"
  strip -o "$D/real/wirebench" "$ROOT/target/release/wirebench" || exit 1
  strip -o "$D/real/quic_floor" "$ROOT/target/release/examples/quic_floor" || exit 1
  [ -n "$base" ] && { strip -o "$D/real/wirebench-base" "$base" || exit 1; }
  strip -o "$D/real/iperf3" "${IPERF3:-$(command -v iperf3)}"
  strip -o "$D/real/quinn-perf" "${QUINN_SRC:-/work/tools/quinn-src}/target/release/quinn-perf"
  strip -o "$D/real/sockperf" "$(command -v sockperf)"
  # The C libraries they link, and the loader to run them with where the machine's are older.
  for bin in "$D"/real/*; do
    ldd "$bin" | awk '/=>/ {print $3} /ld-linux/ {print $1}' | grep '^/' | while read -r lib; do
      cp -L "$lib" "$D/lib/"
    done
  done
  cp "$0" "$D/many-cores.sh"
  du -sh "$D"
}

run() {
  local OUT=${OUT:-/tmp/out}
  mkdir -p "$OUT" "$D/bin" "$D/quinn/target/release"
  # Nothing of the bench goes into a results store of this machine.
  XDG_DATA_HOME=$(mktemp -d)
  export XDG_DATA_HOME
  cd "$ROOT" || exit 1
  local py
  py=$(command -v python3 || command -v python)
  echo "cpus $(nproc), kernel $(uname -r), $($py --version 2>&1), rmem_max $(cat /proc/sys/net/core/rmem_max), uid $(id -u)"
  local loader
  loader=$(ls "$D"/lib/ld-linux* 2>/dev/null | head -1)
  for t in "$D"/real/*; do
    local name w
    name=$(basename "$t")
    w="$D/bin/$name"
    # Each tool runs as it is where this machine's libraries do; otherwise through the loader.
    if "$t" --version >/dev/null 2>&1 || "$t" --help >/dev/null 2>&1; then
      printf '#!/bin/sh\nexec "%s" "$@"\n' "$t" >"$w"
    else
      printf '#!/bin/sh\nexec "%s" --library-path "%s" "%s" "$@"\n' "$loader" "$D/lib" "$t" >"$w"
      echo "$name: through the carried loader"
    fi
    chmod +x "$w"
  done
  cp "$D/bin/quinn-perf" "$D/quinn/target/release/quinn-perf"
  ulimit -n 65536 2>/dev/null
  local common=(--iperf3 "$D/bin/iperf3" --sockperf "$D/bin/sockperf" --quinn-src "$D/quinn"
    --quic-floor "$D/bin/quic_floor" --quinn-seconds 3 --seconds 2 --saw-msgs 20000 --pairs "${PAIRS:-3}")
  local new=first_run,udp1472,udp1472_P1,udp1472_P4,udp1472_P8,saw_udp_1k,ping_udp_1k,saw_tcp_1k,ping_tcp_1k,tcp128k_P1,tcp128k_P8,quic_1k,quic_saw_1k,quic_saw_floor,quic_down_pmtu
  local base=udp1472_P1,udp1472_P8,saw_udp_1k,ping_udp_1k,quic_1k,quic_saw_1k
  echo "=== this tree"
  timeout "${T_NEW:-330}" "$py" bench/compare.py --wirebench "$D/bin/wirebench" "${common[@]}" \
    --only "${ONLY_NEW:-$new}" --out "$OUT/new.json" >"$OUT/new.txt" 2>&1
  tail -c 7000 "$OUT/new.txt"
  if [ -x "$D/bin/wirebench-base" ]; then
    echo "=== baseline"
    timeout "${T_BASE:-180}" "$py" bench/compare.py --wirebench "$D/bin/wirebench-base" "${common[@]}" \
      --only "${ONLY_BASE:-$base}" --out "$OUT/base.json" >"$OUT/base.txt" 2>&1
    tail -c 4000 "$OUT/base.txt"
  fi
  [ "${T_Q1:-50}" = 0 ] && return
  echo "=== this tree, QUIC with the runtime on one worker (TOKIO_WORKER_THREADS=1)"
  TOKIO_WORKER_THREADS=1 timeout "${T_Q1:-50}" "$py" bench/compare.py --wirebench "$D/bin/wirebench" \
    "${common[@]}" --only "${ONLY_Q1:-quic_1k,quic_saw_1k}" --out "$OUT/quic1.json" >"$OUT/quic1.txt" 2>&1
  tail -c 1500 "$OUT/quic1.txt"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: bench/many-cores.sh prepare [BASELINE_WIREBENCH] | run" >&2; exit 2 ;;
esac
