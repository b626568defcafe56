//! A deadline for a thread blocked in a socket receive, kept by a POSIX timer that signals that
//! thread, instead of the kernel's receive timeout.
//!
//! Why not a receive timeout (`SO_RCVTIMEO`): it arms and cancels a kernel timer on every
//! blocking receive, about 0.13 µs of a 12 µs loopback round trip, and the kernel rounds it up
//! to its tick (4 ms at `HZ=250`), so a 100 µs request timeout fired after 4–8 ms.
//!
//! Why not a helper thread that sleeps until the deadline (what this was before): it woke once
//! per timeout to find the deadline moved on, an extra timer interrupt and two context switches
//! each time (741 local timer interrupts a second against the tick's 250). With both ends on one
//! CPU that hit 1 in 150 round trips at stop-and-wait's least RTO (2 ms) and lifted the p99 by
//! a fifth to four fifths (14–23 µs against 12 µs with a 20 ms RTO; p50 equal).
//!
//! How: the receiving thread owns a timer (`timer_create`, `SIGEV_THREAD_ID`) whose signal
//! interrupts its receive (`EINTR`). Deadlines move later with every exchange; the timer is
//! re-armed only when the deadline has moved past it by half the distance it was armed at, or
//! comes before it. In a steady exchange it thus never fires: no extra interrupt, one system
//! call per half timeout (every 1 ms at 2 ms). That call must stay out of the round trips being
//! timed: moving the CPU's next timer event reprograms its local APIC deadline, which costs
//! 8–13 µs in this VM after a pause (0.4 µs in a tight loop; `lab/timer-rearm-cost.c`). Inside
//! the round trips it took the p99 from 11.5 to 18.5 µs. So the callers also set the timer
//! between round trips, to the earliest the next deadline can be, and the wait's own
//! [`RecvAlarm::set`] finds it in place. The timer fires before a deadline only when the
//! exchange paused for more than half a timeout; the receiver then looks at the clock
//! ([`RecvAlarm::interrupted`]) and the next `set` moves the timer to the deadline.

use std::io;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The signal that interrupts the receive. Ignored by default and sent by nothing else here:
/// the handler below does nothing, its only effect is that a blocked receive returns `EINTR`.
const WAKE_SIGNAL: libc::c_int = libc::SIGURG;

/// How often the timer fires again after its deadline until it is re-armed: a signal that
/// lands just before the receive starts interrupts nothing.
const AGAIN_EVERY: Duration = Duration::from_millis(1);

/// When the timer fires, and how far a later deadline may lie before the timer is moved to it.
#[derive(Debug, Clone, Copy)]
struct Armed {
    until: Instant,
    keep_within: Duration,
}

/// Where the timer stands.
#[derive(Debug, Clone, Copy)]
enum Timer {
    Off,
    At(Armed),
    /// It has fired and fires every [`AGAIN_EVERY`] until it is moved or stopped (also what a
    /// failed `timer_settime` leaves: not known to be off).
    Fired,
}

/// The receiving thread's deadline: set it before each blocking receive, and after an
/// `Interrupted` receive tell it the time ([`RecvAlarm::interrupted`]). Its timer signals the
/// thread that made it, so only that thread may set it ([`RecvAlarm::set`] refuses others).
pub struct RecvAlarm {
    timer: libc::timer_t,
    /// The thread the timer signals.
    owner: libc::pthread_t,
    timer_is: Timer,
    /// Times the timer was set (tests look at it: a steady exchange sets it once).
    arms: u64,
}

// SAFETY: `timer_t` is the kernel's id of the timer, valid from any thread of the process; the
// thread it signals is fixed when it is made, and `set` checks that it runs there. Moving the
// alarm lets a port that owns it start on one thread and receive on another before its first
// receive makes the alarm.
unsafe impl Send for RecvAlarm {}

impl RecvAlarm {
    /// Makes the timer for the calling thread, the one that will block.
    pub fn for_this_thread() -> io::Result<Self> {
        install_handler()?;
        // SAFETY: a zeroed sigevent is valid; the fields set below make it "signal this thread".
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = WAKE_SIGNAL;
        // SAFETY: gettid has no preconditions.
        event.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: both pointers are valid for the call; the timer is deleted in Drop.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RecvAlarm {
            timer,
            // SAFETY: pthread_self has no preconditions.
            owner: unsafe { libc::pthread_self() },
            timer_is: Timer::Off,
            arms: 0,
        })
    }

    /// The next deadline (None: none). Usually nothing but a comparison: the timer moves only
    /// for a deadline before it, or one past it by more than it keeps within.
    pub fn set(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        self.set_late_by(deadline, Duration::ZERO)
    }

    /// As [`RecvAlarm::set`], for a deadline that may be kept up to `late` late: a timer that
    /// fires that much after it stays where it is. For a deadline that creeps earlier by a
    /// little each time (QUIC's loss-detection timer as a jittery RTT's variance decays: 0.1
    /// to 0.5 ms of 30 each round trip on a busy machine), where an exact one would move the
    /// timer on every receive.
    pub fn set_late_by(&mut self, deadline: Option<Instant>, late: Duration) -> io::Result<()> {
        // SAFETY: pthread_self and pthread_equal have no preconditions.
        if unsafe { libc::pthread_equal(self.owner, libc::pthread_self()) } == 0 {
            return Err(io::Error::other(
                "a receive alarm was set from a thread other than the one it interrupts",
            ));
        }
        let Some(deadline) = deadline else {
            // Stopped rather than left to fire every millisecond through a pause.
            return match self.timer_is {
                Timer::Off => Ok(()),
                Timer::At(_) | Timer::Fired => self.arm(None),
            };
        };
        match self.timer_is {
            Timer::At(a) if deadline >= a.until && deadline - a.until < a.keep_within => Ok(()),
            Timer::At(a) if deadline < a.until && a.until - deadline <= late => Ok(()),
            _ => self.arm(Some(deadline)),
        }
    }

    /// After an `Interrupted` receive, with the clock read that followed: a timer that has
    /// fired keeps firing every millisecond until the next [`RecvAlarm::set`] re-arms it.
    pub fn interrupted(&mut self, now: Instant) {
        if matches!(self.timer_is, Timer::At(a) if a.until <= now) {
            self.timer_is = Timer::Fired;
        }
    }

    fn arm(&mut self, at: Option<Instant>) -> io::Result<()> {
        let now = Instant::now();
        // Relative to `now`: the kernel counts from its own clock read, later, so the timer
        // never fires before `at`. Zero disarms, so a deadline already passed gets 1 ns.
        let value = match at {
            None => Duration::ZERO,
            Some(at) => at
                .saturating_duration_since(now)
                .max(Duration::from_nanos(1)),
        };
        let spec = libc::itimerspec {
            it_interval: timespec(AGAIN_EVERY),
            it_value: timespec(value),
        };
        // SAFETY: the timer is alive (deleted only in Drop) and `spec` is valid for the call.
        let set = unsafe { libc::timer_settime(self.timer, 0, &spec, std::ptr::null_mut()) };
        if set != 0 {
            self.timer_is = Timer::Fired;
            return Err(io::Error::last_os_error());
        }
        self.arms += 1;
        self.timer_is = match at {
            None => Timer::Off,
            Some(until) => Timer::At(Armed {
                until,
                keep_within: until.saturating_duration_since(now) / 2,
            }),
        };
        Ok(())
    }

    #[cfg(test)]
    fn armed_until(&self) -> Option<Instant> {
        match self.timer_is {
            Timer::At(a) => Some(a.until),
            Timer::Off | Timer::Fired => None,
        }
    }

    /// Times the timer was moved or stopped (for tests of its users).
    #[cfg(test)]
    pub(crate) fn moves(&self) -> u64 {
        self.arms
    }

    /// Whether the timer is stopped (for tests of its users).
    #[cfg(test)]
    pub(crate) fn is_off(&self) -> bool {
        matches!(self.timer_is, Timer::Off)
    }
}

impl std::fmt::Debug for RecvAlarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvAlarm")
            .field("timer", &self.timer_is)
            .finish()
    }
}

impl Drop for RecvAlarm {
    fn drop(&mut self) {
        // SAFETY: the timer was made in for_this_thread and is deleted only here. A signal it
        // sent just before is pending on this thread and is taken on this call's return, not in
        // whatever blocking call comes next.
        unsafe { libc::timer_delete(self.timer) };
    }
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        // Below 10^9: fits every c_long.
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// Installs the do-nothing handler for [`WAKE_SIGNAL`] once per process, without
/// `SA_RESTART`, so that the signal makes a blocked receive return `EINTR`.
fn install_handler() -> io::Result<()> {
    static INSTALLED: OnceLock<Option<i32>> = OnceLock::new();
    extern "C" fn do_nothing(_: libc::c_int) {}
    let failed = *INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler is
        // async-signal-safe (it does nothing).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = do_nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            (libc::sigaction(WAKE_SIGNAL, &action, std::ptr::null_mut()) != 0).then(|| {
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EINVAL)
            })
        }
    });
    match failed {
        Some(code) => Err(io::Error::from_raw_os_error(code)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    /// A socket connected to one that never answers. Its receive timeout is a backstop that
    /// bounds a test whose alarm fails (the receive then reports `WouldBlock`, not
    /// `Interrupted`).
    fn quiet_pair() -> (UdpSocket, UdpSocket) {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(silent.local_addr().unwrap()).unwrap();
        socket.set_read_timeout(Some(BACKSTOP)).unwrap();
        (socket, silent)
    }

    const BACKSTOP: Duration = Duration::from_secs(20);

    /// A receive on `socket` ends by its own (50 ms) timeout, not by the alarm, after at most
    /// `signals_queued` interruptions by signals sent before.
    fn waits_its_own_timeout(socket: &UdpSocket, signals_queued: usize) {
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut buf = [0u8; 8];
        let mut err = socket.recv(&mut buf).unwrap_err();
        for _ in 0..signals_queued {
            if err.kind() == io::ErrorKind::Interrupted {
                err = socket.recv(&mut buf).unwrap_err();
            }
        }
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err}"
        );
    }

    #[test]
    fn a_receive_without_a_timeout_ends_at_the_deadline() {
        let (socket, _silent) = quiet_pair();
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        let mut buf = [0u8; 8];
        for wait in [Duration::from_micros(300), Duration::from_millis(20)] {
            let begun = Instant::now();
            alarm.set(Some(begun + wait)).unwrap();
            let err = socket.recv(&mut buf).unwrap_err();
            let took = begun.elapsed();
            assert_eq!(err.kind(), io::ErrorKind::Interrupted);
            // Never early; late by a scheduling delay, not by the kernel's 4 ms tick. The upper
            // bound only catches a missed deadline (the timer fires again every millisecond) on
            // a busy machine.
            assert!(took >= wait, "woke after {took:?}, before {wait:?}");
            assert!(took < wait + Duration::from_secs(2), "woke after {took:?}");
            alarm.interrupted(Instant::now());
        }
    }

    #[test]
    fn an_earlier_deadline_moves_the_timer() {
        let (socket, _silent) = quiet_pair();
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        // The timer is set an hour away...
        alarm
            .set(Some(Instant::now() + Duration::from_secs(3600)))
            .unwrap();
        // ...and must still keep this deadline.
        let begun = Instant::now();
        alarm.set(Some(begun + Duration::from_millis(5))).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(
            socket.recv(&mut buf).unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
        assert!(begun.elapsed() >= Duration::from_millis(5));
        assert_eq!(alarm.arms, 2);
    }

    #[test]
    fn a_deadline_that_may_be_late_moves_the_timer_only_past_that() {
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        let first = Instant::now() + Duration::from_secs(30);
        alarm.set(Some(first)).unwrap();
        // Earlier by a little, a millisecond at a time: the timer stays while it is at most
        // 3 ms late...
        let late = Duration::from_millis(3);
        for ms in 1..=3 {
            let deadline = first - Duration::from_millis(ms);
            alarm.set_late_by(Some(deadline), late).unwrap();
            assert_eq!(alarm.armed_until(), Some(first), "{ms} ms earlier");
        }
        // ...and moves when it would be later than that.
        let deadline = first - Duration::from_millis(4);
        alarm.set_late_by(Some(deadline), late).unwrap();
        assert_eq!(alarm.armed_until(), Some(deadline));
        // An exact deadline moves it for any difference.
        let exact = deadline - Duration::from_micros(1);
        alarm.set(Some(exact)).unwrap();
        assert_eq!(alarm.armed_until(), Some(exact));
        assert_eq!(alarm.arms, 3);
    }

    #[test]
    fn a_steady_exchange_sets_the_timer_once_and_is_never_interrupted() {
        // Each deadline a little later than the one before, as each round trip sets it: all
        // fall within half the first distance (10 s), so the timer stays where it was set.
        let (socket, peer) = quiet_pair();
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        let mut buf = [0u8; 8];
        for _ in 0..2000 {
            alarm
                .set(Some(Instant::now() + Duration::from_secs(20)))
                .unwrap();
            peer.send_to(b"ack", socket.local_addr().unwrap()).unwrap();
            assert_eq!(socket.recv(&mut buf).unwrap(), 3);
        }
        assert_eq!(alarm.arms, 1);
    }

    #[test]
    fn a_timer_that_fires_before_a_later_deadline_is_moved_to_it() {
        // The second deadline lies within what the timer keeps (half of 100 ms), so the timer
        // stays at the first one and fires there; the receiver sees the clock short of its
        // deadline, and the next set moves the timer to it.
        let (socket, _silent) = quiet_pair();
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        let begun = Instant::now();
        let (first, deadline) = (
            begun + Duration::from_millis(100),
            begun + Duration::from_millis(140),
        );
        alarm.set(Some(first)).unwrap();
        alarm.set(Some(deadline)).unwrap();
        assert_eq!(alarm.armed_until(), Some(first));
        let mut buf = [0u8; 8];
        let err = socket.recv(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Interrupted);
        let now = Instant::now();
        assert!(now >= first);
        alarm.interrupted(now);
        assert!(matches!(alarm.timer_is, Timer::Fired), "{alarm:?}");
        // On a machine too busy to wake within 40 ms the deadline has passed too: done.
        if now < deadline {
            alarm.set(Some(deadline)).unwrap();
            assert_eq!(alarm.armed_until(), Some(deadline));
            let err = socket.recv(&mut buf).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::Interrupted);
            assert!(Instant::now() >= deadline);
        }
    }

    #[test]
    fn an_answer_before_the_deadline_is_received() {
        let (socket, silent) = quiet_pair();
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        alarm
            .set(Some(Instant::now() + Duration::from_secs(3600)))
            .unwrap();
        silent
            .send_to(b"pong", socket.local_addr().unwrap())
            .unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(socket.recv(&mut buf).unwrap(), 4);
    }

    /// An alarm whose deadline has passed, and the receive on `socket` it interrupted.
    fn fired(socket: &UdpSocket) -> RecvAlarm {
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        alarm.set(Some(Instant::now())).unwrap();
        assert_eq!(
            socket.recv(&mut [0u8; 8]).unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
        alarm
    }

    #[test]
    fn no_interruption_outlives_the_alarm() {
        let (socket, _silent) = quiet_pair();
        let alarm = fired(&socket);
        // A passed deadline left unhandled interrupts again and again...
        assert_eq!(
            socket.recv(&mut [0u8; 8]).unwrap_err().kind(),
            io::ErrorKind::Interrupted
        );
        // ...until the alarm is gone: then a blocking receive waits its own timeout.
        drop(alarm);
        waits_its_own_timeout(&socket, 0);
    }

    /// A timer that fired keeps firing until moved; no deadline (a pause before the next
    /// request) stops it too.
    #[test]
    fn no_deadline_stops_a_timer_that_fired() {
        let (socket, _silent) = quiet_pair();
        let mut alarm = fired(&socket);
        alarm.interrupted(Instant::now());
        alarm.set(None).unwrap();
        // A signal already queued may still interrupt once; after that the receive waits its
        // own timeout.
        waits_its_own_timeout(&socket, 1);
    }

    #[test]
    fn no_deadline_disarms_the_timer() {
        let (socket, _silent) = quiet_pair();
        let mut alarm = RecvAlarm::for_this_thread().unwrap();
        alarm
            .set(Some(Instant::now() + Duration::from_millis(1)))
            .unwrap();
        alarm.set(None).unwrap();
        waits_its_own_timeout(&socket, 0);
    }
}
