//! Client, UDP request-response with one request outstanding (`ping`, `rr -c 1`) on a blocking
//! socket in the calling thread: the same exchange and the same core `RequestTracker` as the
//! async `rr::udp_flow`, minus the readiness polling through the runtime — the thread sleeps in
//! `recv` itself and wakes when the response lands, one wake-up less per round trip, as
//! sockperf does. The receive has no kernel timeout: a [`RecvAlarm`] keeps the deadlines.

use std::io;
use std::net::UdpSocket;
use std::time::Instant;

use hdrhistogram::Histogram;
use wirebench_core::machine::rr::{Answer, Expiry, RequestTracker};
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::datagram::{Header, Kind, HEADER_LEN};

use super::alarm::RecvAlarm;
use super::rr::{write_request_header, FlowTally, Plan, Shape};
use super::wall_clock::ExchangeLog;
use crate::transport::syscall;

/// Runs one flow with one request outstanding on `socket` (connected to the server, blocking);
/// records each response time (ns) in `hist`. Timeouts, retries, loss and late answers are
/// decided by `tracker`. With `log`, each answer at the first try is noted with the server's
/// stamps (one-way delays).
pub fn flow(
    socket: &UdpSocket,
    session: u32,
    shape: Shape,
    plan: Plan,
    tracker: &mut RequestTracker,
    hist: &mut Histogram<u64>,
    mut log: Option<&mut ExchangeLog>,
) -> io::Result<FlowTally> {
    socket.set_nonblocking(false)?;
    let mut out = vec![0u8; HEADER_LEN + shape.request];
    let mut buf = vec![0u8; HEADER_LEN + shape.response + 1];
    let mut send_errors = 0u64;
    let mut next_send_at: Option<Instant> = None;
    // Interrupts the receive at the next deadline; a steady ping moves its timer once per half
    // timeout.
    let mut alarm = RecvAlarm::for_this_thread()?;
    loop {
        if plan.stopped() {
            break;
        }
        // One clock read per turn (and one per answer): the send below follows it at once.
        let now = Instant::now();
        if tracker.outstanding() == 0
            && plan.more(tracker.counts().sent, now)
            && next_send_at.is_none_or(|at| now >= at)
        {
            let seq = tracker.send_new(now);
            send_errors += u64::from(!send_request(socket, &mut out, session, seq, false));
            next_send_at = plan.interval.map(|pause| now + pause);
        }
        let more = plan.more(tracker.counts().sent, now);
        if tracker.outstanding() == 0 && !more {
            break;
        }
        let send_at = next_send_at
            .filter(|_| more && tracker.outstanding() == 0)
            .or(plan.until.filter(|_| more));
        let wake = match (tracker.poll_timeout(), send_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if tracker.outstanding() == 0 {
            // Nothing to wait for but the next request's time.
            alarm.set(None)?;
            if let Some(at) = wake {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
            }
            continue;
        }
        // A deadline already passed is handled here: the alarm would only catch it a
        // signal's round later.
        if wake.is_some_and(|at| at <= now) {
            send_errors += expire(socket, &mut out, session, tracker, now);
            continue;
        }
        alarm.set(wake)?;
        match syscall::recv(socket, &mut buf, 0) {
            Ok(n) => match Header::decode(&buf[..n]) {
                Ok(h)
                    if h.kind == Kind::Response
                        && h.session == session
                        && n == HEADER_LEN + shape.response =>
                {
                    // Deadlines that passed before this response come first, so no sample is
                    // ever longer than the timeout: such a response is late.
                    let now = Instant::now();
                    send_errors += expire(socket, &mut out, session, tracker, now);
                    if let Answer::Answered {
                        response_time,
                        retried,
                    } = tracker.on_response(h.seq, now)
                    {
                        hist.saturating_record(duration_ns(response_time));
                        if let Some(log) = log.as_deref_mut().filter(|_| !retried) {
                            if let Some(sent) = now.checked_sub(response_time) {
                                log.note(sent, now, &buf[HEADER_LEN..n]);
                            }
                        }
                    }
                    // Between round trips: the timer set for the next request's deadline (no
                    // earlier than this), so that its wait makes no system call. (With a pause
                    // between requests the loop disarms it instead.)
                    if plan.interval.is_none()
                        && tracker.outstanding() == 0
                        && plan.more(tracker.counts().sent, now)
                    {
                        alarm.set(Some(now + tracker.timeout()))?;
                    }
                }
                // Not ours, or malformed: ignored.
                _ => {}
            },
            // The alarm (or another signal): whatever deadline has passed is handled.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                ) =>
            {
                let now = Instant::now();
                alarm.interrupted(now);
                send_errors += expire(socket, &mut out, session, tracker, now);
            }
            // An ICMP error (port unreachable) from an earlier send: the request it belongs to
            // will time out.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(FlowTally {
        counts: tracker.counts(),
        send_errors,
    })
}

/// Handles every deadline at or before `now`: sends the retries, lets the tracker declare the
/// rest lost. Returns the sends the OS refused.
fn expire(
    socket: &UdpSocket,
    out: &mut [u8],
    session: u32,
    tracker: &mut RequestTracker,
    now: Instant,
) -> u64 {
    let mut refused = 0;
    while let Some(expiry) = tracker.handle_timeout(now) {
        if let Expiry::Retry { seq } = expiry {
            refused += u64::from(!send_request(socket, out, session, seq, true));
        }
    }
    refused
}

/// Sends request `seq`; false when the OS refused it (counted by the caller, never swallowed).
fn send_request(
    socket: &UdpSocket,
    out: &mut [u8],
    session: u32,
    seq: u64,
    retransmit: bool,
) -> bool {
    // Only a refusal counts as a send error (an alarm that interrupts the call is none).
    write_request_header(out, session, seq, retransmit)
        && syscall::send_through_signals(socket, out, 0).is_ok()
}
