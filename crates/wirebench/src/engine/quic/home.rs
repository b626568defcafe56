//! Where the server's QUIC work runs: a few threads, each with a single-threaded tokio runtime
//! (a connection's *home*), and a `quinn::Runtime` that puts each accepted connection's driver
//! on the home with the fewest connections. The session that uses the connection then runs its
//! data loop there too ([`Home::spawn`]), so the stream writer, quinn's connection driver and,
//! for the first connection, the endpoint driver wake each other on one thread.
//!
//! Why: on the multi-threaded runtime those three tasks hop between workers at every wake-up.
//! On 16 cores our server paid 0.91–1.12 CPU s per GiB downloaded for that, and reached
//! 0.94–1.03× quinn's own `perf` tool, which runs each end on one thread; with the whole
//! server on one worker it paid 0.57–0.71 and reached 1.15×. Several homes keep `-P` spread
//! over cores: connection *n* of a run lands on the *n*-th least busy thread.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use quinn::{AsyncTimer, AsyncUdpSocket};
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The most connection homes a server starts, whatever its core count: each is a thread.
const MAX_HOMES: usize = 16;

/// The server's connection homes, and the quinn runtime that places connections on them.
/// Their threads end once this and everything running on them (the endpoint, connections still
/// closing) are gone.
#[derive(Clone)]
pub struct ConnectionHomes {
    inner: Arc<Homes>,
}

/// The homes themselves; held by the quinn runtime, so by the endpoint and every connection.
struct Homes {
    homes: Vec<HomeSlot>,
    /// Dropping these ends the threads' runtimes (tasks still on them are dropped).
    _stops: Vec<oneshot::Sender<()>>,
}

/// One home: its runtime, and how many connections live there now.
struct HomeSlot {
    handle: Handle,
    connections: Arc<AtomicUsize>,
}

/// The thread a QUIC connection's driver runs on: run the session's work on the connection
/// there.
#[derive(Clone, Debug)]
pub struct Home {
    handle: Handle,
}

/// A connection's place on its home, counted while its driver lives; given up when dropped.
struct Seat {
    connections: Arc<AtomicUsize>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

thread_local! {
    /// The home of the connection being accepted on this thread, and its seat: set by
    /// [`ConnectionHomes::accept`] around quinn's accept, which spawns the connection's driver
    /// (through [`quinn::Runtime::spawn`]) before it returns.
    static PLACING: RefCell<Option<(usize, Seat)>> = const { RefCell::new(None) };
}

impl ConnectionHomes {
    /// One home per core (at most [`MAX_HOMES`]), each a thread named `wb-quic-N`.
    pub fn start() -> io::Result<ConnectionHomes> {
        let count = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(MAX_HOMES);
        Self::start_with(count).map(|(homes, _threads)| homes)
    }

    /// `count` homes (at least one), and their threads.
    fn start_with(count: usize) -> io::Result<(ConnectionHomes, Vec<std::thread::JoinHandle<()>>)> {
        let mut homes = Vec::new();
        let mut stops = Vec::new();
        let mut threads = Vec::new();
        for index in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            homes.push(HomeSlot {
                handle: runtime.handle().clone(),
                connections: Arc::new(AtomicUsize::new(0)),
            });
            stops.push(stop);
            let thread = std::thread::Builder::new()
                .name(format!("wb-quic-{index}"))
                .spawn(move || {
                    // Runs the home's tasks until its stop is dropped; the runtime, and what is
                    // left on it, is dropped here, off any runtime.
                    let _ = runtime.block_on(stopped);
                })?;
            threads.push(thread);
        }
        let inner = Arc::new(Homes {
            homes,
            _stops: stops,
        });
        Ok((ConnectionHomes { inner }, threads))
    }

    /// The runtime to give quinn's endpoint: the endpoint driver runs on the first home,
    /// each connection's driver on the home [`accept`](Self::accept) chose.
    pub fn runtime(&self) -> Arc<dyn quinn::Runtime> {
        Arc::new(HomeRuntime {
            inner: Arc::clone(&self.inner),
        })
    }

    /// The first home, where the endpoint driver runs: make the endpoint's socket inside it
    /// (`Handle::enter`), so its readiness wakes that thread.
    pub fn first(&self) -> Home {
        self.home(0)
    }

    /// Accepts `incoming` onto the least busy home (the first on a tie, where the endpoint
    /// driver runs) and says which.
    pub fn accept(
        &self,
        incoming: quinn::Incoming,
    ) -> Result<(quinn::Connecting, Home), quinn::ConnectionError> {
        let index = self.least_busy();
        let connections = &self.inner.homes[index].connections;
        connections.fetch_add(1, Ordering::Relaxed);
        let seat = Seat {
            connections: Arc::clone(connections),
        };
        PLACING.with(|p| *p.borrow_mut() = Some((index, seat)));
        let accepted = incoming.accept();
        // A refused connection spawned no driver: its seat is given up here.
        PLACING.with(|p| p.borrow_mut().take());
        accepted.map(|connecting| (connecting, self.home(index)))
    }

    fn least_busy(&self) -> usize {
        let homes = &self.inner.homes;
        (0..homes.len())
            .min_by_key(|&i| homes[i].connections.load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    fn home(&self, index: usize) -> Home {
        Home {
            handle: self.inner.homes[index].handle.clone(),
        }
    }
}

impl fmt::Debug for ConnectionHomes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionHomes")
            .field("homes", &self.inner.homes.len())
            .finish()
    }
}

impl Home {
    /// Runs `work` on this home's thread.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(work)
    }

    /// The home's runtime, to spawn into a `JoinSet` (`spawn_on`) or make a socket in.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// quinn's runtime on the homes: tokio's timers, spawns placed as described in the module.
struct HomeRuntime {
    inner: Arc<Homes>,
}

impl fmt::Debug for HomeRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HomeRuntime")
    }
}

impl quinn::Runtime for HomeRuntime {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn AsyncTimer>> {
        quinn::TokioRuntime.new_timer(at)
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        match PLACING.with(|p| p.borrow_mut().take()) {
            // A connection's driver, on the home chosen for it, holding its seat while it runs.
            Some((index, seat)) => {
                self.inner.homes[index].handle.spawn(async move {
                    let _seat = seat;
                    future.await;
                });
            }
            // The endpoint driver (and anything else quinn starts): the first home.
            None => {
                self.inner.homes[0].handle.spawn(future);
            }
        }
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        let _inside = self.inner.homes[0].handle.enter();
        quinn::TokioRuntime.wrap_udp_socket(socket)
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_string()
    }

    /// What quinn does when it accepts a connection onto home `index`: spawn its driver
    /// through the runtime while the placement is set. Returns the driver's thread name.
    fn spawn_as_accept(homes: &ConnectionHomes, index: usize) -> String {
        let connections = &homes.inner.homes[index].connections;
        connections.fetch_add(1, Ordering::Relaxed);
        let seat = Seat {
            connections: Arc::clone(connections),
        };
        PLACING.with(|p| *p.borrow_mut() = Some((index, seat)));
        let (tx, rx) = mpsc::channel();
        homes.runtime().spawn(Box::pin(async move {
            let _ = tx.send(thread_name());
        }));
        rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default()
    }

    #[test]
    fn a_connection_driver_runs_on_its_home_and_the_endpoint_driver_on_the_first() {
        let (homes, _threads) = ConnectionHomes::start_with(3).unwrap();
        assert_eq!(spawn_as_accept(&homes, 2), "wb-quic-2");
        let (tx, rx) = mpsc::channel();
        homes.runtime().spawn(Box::pin(async move {
            let _ = tx.send(thread_name());
        }));
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            "wb-quic-0"
        );
        let (tx, rx) = mpsc::channel();
        homes.home(1).spawn(async move {
            let _ = tx.send(thread_name());
        });
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            "wb-quic-1"
        );
    }

    #[test]
    fn connections_go_to_the_least_busy_home_and_leave_it_when_they_end() {
        let (homes, _threads) = ConnectionHomes::start_with(3).unwrap();
        let count = |i: usize| homes.inner.homes[i].connections.load(Ordering::Relaxed);
        // A seat is taken for every placed connection: the first goes where the endpoint
        // driver is, the next two spread.
        let mut held = Vec::new();
        for expected in [0, 1, 2, 0] {
            let index = homes.least_busy();
            assert_eq!(index, expected);
            let connections = &homes.inner.homes[index].connections;
            connections.fetch_add(1, Ordering::Relaxed);
            held.push(Seat {
                connections: Arc::clone(connections),
            });
        }
        assert_eq!((count(0), count(1), count(2)), (2, 1, 1));
        held.remove(1);
        assert_eq!(count(1), 0);
        assert_eq!(homes.least_busy(), 1);
    }

    #[test]
    fn a_driver_gives_up_its_seat_when_it_ends() {
        let (homes, _threads) = ConnectionHomes::start_with(2).unwrap();
        let connections = Arc::clone(&homes.inner.homes[1].connections);
        connections.fetch_add(1, Ordering::Relaxed);
        let seat = Seat {
            connections: Arc::clone(&connections),
        };
        PLACING.with(|p| *p.borrow_mut() = Some((1, seat)));
        let (tx, rx) = mpsc::channel();
        let (end, ended) = oneshot::channel::<()>();
        homes.runtime().spawn(Box::pin(async move {
            let _ = ended.await;
            let _ = tx.send(());
        }));
        assert_eq!(connections.load(Ordering::Relaxed), 1);
        drop(end);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        // The seat is dropped as the driver's task completes; the home is one thread, so a
        // task spawned after the driver's send runs after that.
        let (tx, rx) = mpsc::channel();
        let probe = Arc::clone(&connections);
        homes.home(1).spawn(async move {
            let _ = tx.send(probe.load(Ordering::Relaxed));
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 0);
    }

    #[test]
    fn the_threads_end_when_the_homes_are_dropped() {
        let (homes, threads) = ConnectionHomes::start_with(2).unwrap();
        let runtime = homes.runtime();
        drop(homes);
        // The runtime (as quinn's endpoint holds it) still keeps them.
        assert!(threads.iter().all(|t| !t.is_finished()));
        drop(runtime);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for t in threads {
                let _ = t.join();
            }
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the homes' threads did not end");
    }
}
