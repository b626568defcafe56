//! A throw-away PostgreSQL cluster for the store tests, and [`TestDb`]: one store of either
//! backend, so that one test body runs against SQLite and a real PostgreSQL. The cluster is
//! Debian's `postgresql` (initdb into a temp directory, run as the `postgres` user when we are
//! root since initdb refuses root, a loopback port and a unix socket in that directory); it is
//! shared by the tests that run at once and stopped, by its PID, when the last one drops it.
//! Where the binaries are missing, [`backends`] says so and gives SQLite only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use wirebench::store::{Location, Store};

use crate::support::TempPath;

/// A running cluster; stopped when dropped.
pub struct Cluster {
    dir: TempPath,
    port: u16,
    pid: i32,
    next_db: AtomicU64,
}

/// The newest installed PostgreSQL's bin directory (`/usr/lib/postgresql/N/bin`).
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `program args…`, as the `postgres` user when we are root.
fn as_cluster_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

impl Cluster {
    fn start(bin: &Path) -> Result<Cluster, String> {
        let dir = TempPath::new("-pg");
        std::fs::create_dir(&dir.0).map_err(|e| format!("temp dir: {e}"))?;
        if is_root() {
            run(
                Command::new("chown").arg("postgres:postgres").arg(&dir.0),
                "chown of the cluster directory",
            )?;
        }
        let data = dir.0.join("data");
        run(
            as_cluster_user(&bin.join("initdb"))
                .arg("-D")
                .arg(&data)
                .args(["-U", "wirebench", "--auth=trust", "-E", "UTF8", "--no-sync"])
                .env("LC_ALL", "C"),
            "initdb",
        )?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("free port: {e}"))?
            .port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
            dir.0.display()
        );
        // pg_ctl -w polls the server until it accepts connections, for at most -t seconds.
        run(
            as_cluster_user(&bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.0.join("log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]),
            "pg_ctl start",
        )
        .map_err(|e| {
            let log = std::fs::read_to_string(dir.0.join("log")).unwrap_or_default();
            format!("{e}\n{log}")
        })?;
        let pid = std::fs::read_to_string(data.join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next()?.trim().parse::<i32>().ok())
            .ok_or("postmaster.pid is unreadable")?;
        Ok(Cluster {
            dir,
            port,
            pid,
            next_db: AtomicU64::new(1),
        })
    }

    /// A new, empty database in this cluster; its URL.
    pub fn create_database(&self) -> String {
        let name = format!("t{}", self.next_db.fetch_add(1, Ordering::Relaxed));
        self.sql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://wirebench@127.0.0.1:{}/{name}", self.port)
    }

    /// Runs `sql` in database `db` (on a thread of its own: the `postgres` client must not
    /// run inside the tests' tokio runtime).
    pub fn sql(&self, db: &str, sql: &str) {
        let url = self.url(db);
        let sql = sql.to_string();
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connects");
            client.batch_execute(&sql).expect("SQL runs");
        })
        .join()
        .expect("SQL thread");
    }
}

impl Cluster {
    /// The integers one query returns (first column of each row), in database `db`.
    pub fn ints(&self, db: &str, sql: &str) -> Vec<i64> {
        let url = self.url(db);
        let sql = sql.to_string();
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connects");
            client
                .query(&sql, &[])
                .expect("query runs")
                .iter()
                .map(|row| row.get::<_, i64>(0))
                .collect()
        })
        .join()
        .expect("SQL thread")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SIGINT is PostgreSQL's "fast" shutdown; it ends its own children.
        // SAFETY: kill(2) on the postmaster we started.
        unsafe { libc::kill(self.pid, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while process_alive(self.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if process_alive(self.pid) {
            // SAFETY: as above.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
        let _ = &self.dir; // removed by TempPath's drop
    }
}

static SHARED: Mutex<Weak<Cluster>> = Mutex::new(Weak::new());

/// The shared cluster, started if no test holds it; `None` (after saying why) when
/// PostgreSQL is not installed.
pub fn cluster() -> Option<Arc<Cluster>> {
    let Some(bin) = bin_dir() else {
        eprintln!(
            "SKIPPED the PostgreSQL half: no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)"
        );
        return None;
    };
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = shared.upgrade() {
        return Some(c);
    }
    let c = Arc::new(Cluster::start(&bin).expect("a PostgreSQL cluster starts"));
    *shared = Arc::downgrade(&c);
    Some(c)
}

/// One results store for a test: an SQLite file or a fresh PostgreSQL database.
pub enum TestDb {
    /// A temp file.
    Sqlite(TempPath),
    /// A database of the shared cluster (kept running while this lives).
    Postgres(String, Arc<Cluster>),
}

impl TestDb {
    /// A fresh SQLite store.
    pub fn sqlite() -> TestDb {
        TestDb::Sqlite(TempPath::new(".sqlite3"))
    }

    /// A fresh PostgreSQL store, `None` where PostgreSQL is not installed.
    pub fn postgres() -> Option<TestDb> {
        let c = cluster()?;
        Some(TestDb::Postgres(c.create_database(), c))
    }

    /// Another fresh store of the same backend.
    pub fn another(&self) -> TestDb {
        match self {
            TestDb::Sqlite(_) => TestDb::sqlite(),
            TestDb::Postgres(_, c) => TestDb::Postgres(c.create_database(), c.clone()),
        }
    }

    /// `--db`'s value.
    pub fn arg(&self) -> &str {
        match self {
            TestDb::Sqlite(p) => p.arg(),
            TestDb::Postgres(url, _) => url,
        }
    }

    /// Where the store is.
    pub fn location(&self) -> Location {
        match self {
            TestDb::Sqlite(p) => Location::File(p.0.clone()),
            TestDb::Postgres(url, _) => Location::Postgres(url.clone()),
        }
    }

    /// Opens the store.
    pub fn open(&self) -> Store {
        Store::open(self.location()).expect("the test store opens")
    }

    /// The database name and the cluster, for a PostgreSQL store.
    pub fn pg(&self) -> Option<(&str, &Cluster)> {
        match self {
            TestDb::Sqlite(_) => None,
            TestDb::Postgres(url, c) => Some((url.rsplit('/').next().unwrap_or(""), c)),
        }
    }

    /// Which backend, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            TestDb::Sqlite(_) => "sqlite",
            TestDb::Postgres(..) => "postgres",
        }
    }
}

/// A fresh store of each backend there is: SQLite, and PostgreSQL where it is installed.
pub fn backends() -> Vec<TestDb> {
    let mut dbs = vec![TestDb::sqlite()];
    dbs.extend(TestDb::postgres());
    dbs
}
