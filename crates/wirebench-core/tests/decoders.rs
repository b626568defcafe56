//! Stable replay of the fuzz targets: every file of the committed corpus (`fuzz/corpus/<target>/`)
//! and, per target, a fixed number of seeded random and mutated inputs go through the same harness
//! functions cargo-fuzz runs (`wirebench_core::untrusted`), which panic on any broken invariant.
//! Deterministic (fixed seed) and bounded (fixed counts), so it runs in CI on stable Rust.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use wirebench_core::untrusted::{self, Target};

fn corpus_dir(target: Target) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target.name())
}

/// The corpus files of `target`, sorted by name.
fn corpus(target: Target) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} missing: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("corpus entry").path();
            let bytes = std::fs::read(&path).expect("corpus file");
            (path.display().to_string(), bytes)
        })
        .collect();
    files.sort();
    files
}

/// Runs one input; on a panic, fails naming the input and its bytes so it can be replayed.
fn run(target: Target, what: &str, data: &[u8], origin: Instant) {
    if catch_unwind(AssertUnwindSafe(|| target.run(data, origin))).is_err() {
        panic!("{} panicked on {what}: {:02x?}", target.name(), data);
    }
}

#[test]
fn corpus_replays_without_a_finding() {
    let origin = Instant::now();
    for target in Target::ALL {
        let files = corpus(target);
        assert!(!files.is_empty(), "no corpus for {}", target.name());
        for (name, data) in &files {
            run(target, name, data, origin);
        }
    }
}

#[test]
fn seeds_run_clean() {
    // The seeds come from the real encoders; each must run clean (the corpus was made from them).
    let origin = Instant::now();
    for target in Target::ALL {
        for (name, data) in untrusted::seeds(target) {
            run(target, name, &data, origin);
        }
    }
}

/// Feeds `count` seeded inputs to `target`: a quarter random bytes, the rest mutations of the
/// corpus and the seeds. Same seed, same inputs, on every run.
fn random_and_mutated(target: Target, count: usize) {
    let origin = Instant::now();
    let mut rng = SplitMix(0x5749_5245_4245_4e43 ^ target.name().len() as u64);
    let mut pool: Vec<Vec<u8>> = corpus(target).into_iter().map(|(_, d)| d).collect();
    pool.extend(untrusted::seeds(target).into_iter().map(|(_, d)| d));
    let started = Instant::now();
    for i in 0..count {
        let data = if i % 4 == 0 {
            let len = rng.below(512);
            (0..len).map(|_| rng.byte()).collect()
        } else {
            mutate(&mut rng, &pool)
        };
        run(target, &format!("seeded input {i}"), &data, origin);
    }
    eprintln!(
        "{}: {count} inputs in {:?}",
        target.name(),
        started.elapsed()
    );
}

// One test per target, so they run in parallel. The counts keep each within seconds in a debug
// build; the sequence-tracker inputs carry ~100 seqs each (and each builds a 128 KiB bitmap).

#[test]
fn seeded_control() {
    random_and_mutated(Target::Control, 200_000);
}

#[test]
fn seeded_datagram() {
    random_and_mutated(Target::Datagram, 30_000);
}

#[test]
fn seeded_seq_tracker() {
    random_and_mutated(Target::SeqTracker, 10_000);
}

#[test]
fn seeded_impair() {
    random_and_mutated(Target::Impair, 100_000);
}

#[test]
fn seeded_iperf3_control() {
    random_and_mutated(Target::Iperf3Control, 200_000);
}

#[test]
fn seeded_iperf3_udp() {
    random_and_mutated(Target::Iperf3Udp, 100_000);
}

#[test]
fn seeded_dns() {
    random_and_mutated(Target::Dns, 50_000);
}

#[test]
fn seeded_perf() {
    random_and_mutated(Target::Perf, 20_000);
}

#[test]
fn harnesses_understand_well_formed_seeds() {
    // Sanity of the harnesses themselves: the well-formed seeds are understood, not all refused.
    let control = untrusted::seeds(Target::Control);
    let (_, client) = control
        .iter()
        .find(|(n, _)| *n == "client-session")
        .expect("seed");
    let summary = untrusted::control_connection(client);
    assert!(summary.preamble_ok);
    assert_eq!((summary.messages, summary.errors), (2, 0));

    let datagram = untrusted::seeds(Target::Datagram);
    let (_, stream) = datagram
        .iter()
        .find(|(n, _)| *n == "stream-reordered")
        .expect("seed");
    let summary = untrusted::data_datagrams(stream);
    // Seqs 0, 1, 3, 2, 3 (duplicate), 9 (the last message is 100 bytes too: 1000 / 100).
    assert_eq!(
        (summary.accepted, summary.delivered, summary.malformed),
        (6, 5, 0)
    );

    let udp = untrusted::seeds(Target::Iperf3Udp);
    let (_, counters) = udp.iter().find(|(n, _)| *n == "counters32").expect("seed");
    let receiver = untrusted::iperf3_udp(counters);
    // Counts 1, 2, 4, 3, 3, 7: highest 7; 5 and 6 missing (3 filled the gap 4 left); 2 late.
    assert_eq!(
        (
            receiver.datagrams,
            receiver.highest,
            receiver.lost,
            receiver.out_of_order
        ),
        (6, 7, 2, 2)
    );
}

/// One mutation of a pool input: bit flips, byte sets, interesting values, inserts, deletes,
/// duplication of a span, or splicing two inputs.
fn mutate(rng: &mut SplitMix, pool: &[Vec<u8>]) -> Vec<u8> {
    let mut data = pool[rng.below(pool.len())].clone();
    for _ in 0..1 + rng.below(5) {
        let len = data.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = rng.byte();
            }
            2 if len > 0 => {
                const INTERESTING: [u8; 8] = [0, 1, 0x7F, 0x80, 0xFF, b'"', b'\\', b'\n'];
                let i = rng.below(len);
                data[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            3 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(15);
                let bytes: Vec<u8> = (0..n).map(|_| rng.byte()).collect();
                data.splice(i..i, bytes);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let end = (i + 1 + rng.below(31)).min(len);
                data.drain(i..end);
            }
            5 if len > 0 => {
                let i = rng.below(len);
                let end = (i + 1 + rng.below(31)).min(len);
                let span = data[i..end].to_vec();
                let at = rng.below(data.len() + 1);
                data.splice(at..at, span);
            }
            _ => {
                let other = &pool[rng.below(pool.len())];
                let cut = rng.below(data.len() + 1);
                let from = rng.below(other.len() + 1);
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
        }
    }
    data
}

/// SplitMix64: a tiny deterministic generator, fast also in debug builds (where the test runs).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0; the tiny modulo bias does not matter here).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Writes the seeds into `fuzz/corpus/<target>/seed-<name>`: run after changing an input layout
/// or an encoder (`cargo test -p wirebench-core --test decoders -- --ignored write_seed_corpus`).
#[test]
#[ignore = "writes files: run by hand to regenerate the seed corpus"]
fn write_seed_corpus() {
    for target in Target::ALL {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, data) in untrusted::seeds(target) {
            std::fs::write(dir.join(format!("seed-{name}")), data).expect("seed file");
        }
    }
}
