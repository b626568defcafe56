#!/usr/bin/env bash
# Bounded fuzzing of every wirebench-core decoder a peer can reach (see fuzz/Cargo.toml and
# crates/wirebench-core/src/untrusted/). Usage:
#   fuzz/run.sh [--install] [SECONDS]     SECONDS per target, default 60
# Needs the nightly toolchain and cargo-fuzz; without them it says how to install them and exits 1
# (--install installs them). Each target runs alone (one job) with memory, allocation and time
# limits, so a panic, unbounded allocation or hang is a crash. The committed corpus
# (fuzz/corpus/<target>) is read, never written: new inputs go to a scratch directory.
# Prints one line per target (executions, corpus size, crashes); exits 1 if anything crashed.
set -euo pipefail

install=0
seconds=60
for arg in "$@"; do
    case "$arg" in
        --install) install=1 ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *[!0-9]*|'') echo "fuzz/run.sh: \"$arg\" is not a number of seconds (expected e.g. 60) or --install" >&2; exit 2 ;;
        *) seconds="$arg" ;;
    esac
done
if [ "$seconds" -lt 1 ]; then
    echo "fuzz/run.sh: SECONDS must be at least 1" >&2
    exit 2
fi

cd "$(dirname "$0")"

missing=()
cargo +nightly --version >/dev/null 2>&1 || missing+=("rustup toolchain install nightly")
cargo fuzz --version >/dev/null 2>&1 || missing+=("cargo install cargo-fuzz --locked")
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$install" -eq 1 ]; then
        for cmd in "${missing[@]}"; do
            echo "fuzz/run.sh: running: $cmd" >&2
            $cmd
        done
    else
        echo "fuzz/run.sh: missing tools; install them with:" >&2
        printf '    %s\n' "${missing[@]}" >&2
        echo "(or run fuzz/run.sh --install $seconds)" >&2
        exit 1
    fi
fi

targets=(control datagram seq_tracker impair iperf3_control iperf3_udp dns perf)

echo "building the fuzz targets (nightly, sanitizer=address)..." >&2
cargo +nightly fuzz build >&2

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=0
summary=()
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t" "artifacts/$t"
    before=$(find "artifacts/$t" -type f | wc -l)
    log="$scratch/$t.log"
    echo "fuzzing $t for ${seconds}s..." >&2
    # -rss_limit_mb: total memory; -malloc_limit_mb: one allocation (a length a peer merely claims);
    # -timeout: seconds per input (a hang).
    status=0
    cargo +nightly fuzz run "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=1024 -malloc_limit_mb=256 -timeout=10 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    corpus=$(grep -o 'corp: [0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    added=$(find "$scratch/$t" -type f | wc -l)
    after=$(find "artifacts/$t" -type f | wc -l)
    crashes=$((after - before))
    if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        crashes=1 # failed without an artifact (e.g. the build or libFuzzer itself): count it
    fi
    if [ "$crashes" -gt 0 ]; then
        failed=1
        echo "fuzz/run.sh: $t found a problem; last lines of its log:" >&2
        tail -40 "$log" >&2
        echo "reproduce with: cd fuzz && cargo +nightly fuzz run $t artifacts/$t/<file>" >&2
    fi
    summary+=("$(printf '%-15s executions %10s   corpus %5s (%s new)   crashes %s' \
        "$t" "${runs:-?}" "${corpus:-?}" "$added" "$crashes")")
done

printf '%s\n' "${summary[@]}"
exit "$failed"
