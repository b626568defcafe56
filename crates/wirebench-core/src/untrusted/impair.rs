//! Harness for the relay's packet path: owns driving one direction's [`Impairer`] with an
//! arbitrary setting, packets, byte-stream chunks and clock moves, and checking its bookkeeping;
//! must not do I/O or read clocks (the virtual clock starts at an instant passed in).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::cursor::Cursor;
use crate::machine::impair::{Impairer, Impairment, Impairments, Loss, MAX_PENDING};
use crate::vocab::units::{BitRate, ByteSize};

/// What the impairment machine did with one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImpairSummary {
    /// Packets or chunks offered.
    pub received: u64,
    /// Copies released (all of them, once drained).
    pub forwarded: u64,
}

/// `data` is a setting, then operations. The setting: a mode byte (bit 0: parse `len u8` bytes of
/// text with [`Impairments::parse_list`], as `--impair` does, and use its up direction (bit 2:
/// down); else a structured setting within the ranges the parser allows; bit 1: byte-stream mode,
/// as the TCP relay uses the machine), then a `u64` seed. Each operation is an op byte and its
/// operands: 0 = offer a packet (`len u16`), 1 = release what is due, 2 = advance the clock
/// (`u32` µs), 3 = jump to the machine's next timeout, 4 = offer a packet or chunk
/// (`len u16`), 5 = move the clock back (`u16` µs; never before the origin).
///
/// Checks: nothing is released that was not offered, no packet more than twice (original and
/// duplicate), with its own length; after "nothing due", the next timeout is in the future (so
/// the relay's loop never spins); the delay line stays bounded; once drained (which must end),
/// `forwarded = received − dropped + duplicated` and the byte count matches what left.
pub fn impairer(data: &[u8], origin: Instant) -> ImpairSummary {
    let mut input = Cursor::new(data);
    let mode = input.u8();
    let spec = if mode & 1 == 1 {
        let len = usize::from(input.u8());
        let text = String::from_utf8_lossy(input.bytes(len)).into_owned();
        match Impairments::parse_list(&text) {
            Ok(both) if mode & 4 != 0 => both.down,
            Ok(both) => both.up,
            Err(e) => {
                // The text is the user's own: it may echo it, but must say something.
                assert!(!e.0.is_empty(), "empty error for {text:?}");
                return ImpairSummary::default();
            }
        }
    } else {
        structured(&mut input)
    };
    let stream = mode & 2 != 0;
    let mut machine: Impairer<(u64, usize)> = Impairer::new(spec, input.u64(), u64::from(mode));

    let mut offset = Duration::ZERO;
    let mut next_id = 0u64;
    let mut lens: HashMap<u64, usize> = HashMap::new();
    let mut released: HashMap<u64, u8> = HashMap::new();
    let mut bytes_out = 0u64;
    while !input.is_empty() {
        let now = origin + offset;
        match input.u8() % 6 {
            0 | 4 => {
                let len = usize::from(input.u16());
                if stream {
                    let at = machine.schedule_bytes(now, len);
                    assert!(at >= now, "a chunk scheduled before it was read");
                    bytes_out += len as u64;
                } else {
                    machine.handle_packet(now, len, (next_id, len));
                    lens.insert(next_id, len);
                    next_id += 1;
                }
            }
            1 => release_due(&mut machine, now, &lens, &mut released, &mut bytes_out),
            2 => offset += Duration::from_micros(u64::from(input.u32())),
            3 => {
                if let Some(t) = machine.poll_timeout() {
                    offset = offset.max(t.saturating_duration_since(origin));
                }
            }
            _ => {
                offset = offset.saturating_sub(Duration::from_micros(u64::from(input.u16())));
            }
        }
        assert!(
            machine.pending() <= MAX_PENDING + 4,
            "delay line grew to {}",
            machine.pending()
        );
        assert_eq!(machine.pending() == 0, machine.poll_timeout().is_none());
    }

    // Drain: each step releases at least one packet, so this ends within the packets offered.
    let mut steps = 0u64;
    while let Some(t) = machine.poll_timeout() {
        steps += 1;
        assert!(steps <= 2 * next_id + 2, "draining does not progress");
        offset = offset.max(t.saturating_duration_since(origin));
        release_due(
            &mut machine,
            origin + offset,
            &lens,
            &mut released,
            &mut bytes_out,
        );
    }
    let c = machine.counts();
    assert_eq!(c.forwarded, c.received - c.dropped + c.duplicated, "{c:?}");
    assert_eq!(c.bytes_forwarded, bytes_out, "bytes forwarded");
    assert!(
        c.queue_drops <= c.dropped && c.delayed <= c.forwarded,
        "{c:?}"
    );
    assert!(
        c.reordered <= c.received && c.duplicated <= c.received,
        "{c:?}"
    );
    ImpairSummary {
        received: c.received,
        forwarded: c.forwarded,
    }
}

/// A setting within what [`Impairments::parse_list`] accepts: probabilities in [0, 1], delay and
/// jitter up to 60 s, any rate, a queue of 0 (the default) or at least 1500 bytes.
fn structured(input: &mut Cursor<'_>) -> Impairment {
    let loss = match input.u8() % 3 {
        0 => Loss::None,
        1 => Loss::Random(input.probability()),
        _ => Loss::GilbertElliott {
            p: input.probability(),
            r: input.probability(),
            loss_bad: input.probability(),
            loss_good: input.probability(),
        },
    };
    let sixty_s = 60_000_000;
    Impairment {
        loss,
        delay: Duration::from_micros(u64::from(input.u32()) % (sixty_s + 1)),
        jitter: Duration::from_micros(u64::from(input.u32()) % (sixty_s + 1)),
        reorder: input.probability(),
        duplicate: input.probability(),
        rate: (input.u8() & 1 == 1).then(|| BitRate(input.u64())),
        queue_limit: ByteSize(match input.u32() {
            0 => 0,
            q => u64::from(q).max(1500),
        }),
    }
}

/// Releases everything due at `now` and checks each packet; afterwards the next timeout, if any,
/// lies after `now`.
fn release_due(
    machine: &mut Impairer<(u64, usize)>,
    now: Instant,
    lens: &HashMap<u64, usize>,
    released: &mut HashMap<u64, u8>,
    bytes_out: &mut u64,
) {
    let limit = machine.pending() + 1;
    for _ in 0..limit {
        let Some((id, len)) = machine.poll_release(now) else {
            break;
        };
        assert_eq!(lens.get(&id), Some(&len), "released a packet never offered");
        let copies = released.entry(id).or_insert(0);
        *copies += 1;
        assert!(*copies <= 2, "packet {id} released {copies} times");
        *bytes_out += len as u64;
    }
    if let Some(t) = machine.poll_timeout() {
        assert!(t > now, "nothing due yet the next timeout has passed");
    }
}
