//! The store's schema as numbered migrations, applied in order and recorded in `PRAGMA
//! user_version` (SQLite) or the table `wirebench_schema` (PostgreSQL). Each version has one
//! text per backend, so both backends always hold the same version numbers with the same
//! tables and columns; the PostgreSQL text uses BIGINT for every integer, identity columns for
//! ids, and ALTERs where SQLite must rebuild a table. Owns the SQL text of the schema; must
//! never edit a migration once released (add a new one instead).

/// One schema version, as each backend writes it.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The SQLite text.
    pub sqlite: &'static str,
    /// The PostgreSQL text: the same tables, columns and constraints.
    pub postgres: &'static str,
}

/// Migration `i` (0-based) takes a database from version `i` to `i + 1`.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        sqlite: V1,
        postgres: PG_V1,
    },
    Migration {
        sqlite: V2,
        postgres: PG_V2,
    },
    Migration {
        sqlite: V3,
        postgres: V3,
    },
    Migration {
        sqlite: V4,
        postgres: PG_V4,
    },
    Migration {
        sqlite: V5,
        postgres: PG_V5,
    },
    Migration {
        sqlite: V6,
        postgres: PG_V6,
    },
    Migration {
        sqlite: V7,
        postgres: PG_V7,
    },
    Migration {
        sqlite: V8,
        postgres: PG_V8,
    },
    Migration {
        sqlite: V9,
        postgres: PG_V9,
    },
    Migration {
        sqlite: V10,
        postgres: PG_V10,
    },
    Migration {
        sqlite: V11,
        postgres: PG_V11,
    },
];

/// The schema version this build writes.
pub const CURRENT_VERSION: u32 = MIGRATIONS.len() as u32;

/// Version 1: campaigns and their runs.
const V1: &str = "
CREATE TABLE campaign (
    id                INTEGER PRIMARY KEY,
    started_at_unix_s INTEGER NOT NULL,
    finished_at_unix_s INTEGER,
    status            TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'aborted')),
    error             TEXT,
    server            TEXT NOT NULL,
    protocols         TEXT NOT NULL,
    mechanisms        TEXT NOT NULL,
    msg_size          INTEGER NOT NULL,
    total_bytes       INTEGER NOT NULL,
    repeat            INTEGER NOT NULL,
    planned_runs      INTEGER NOT NULL,
    parameters_json   TEXT NOT NULL,
    host_name         TEXT,
    kernel            TEXT,
    cpu_model         TEXT,
    wirebench_version TEXT NOT NULL,
    rmem_max_bytes    INTEGER,
    wmem_max_bytes    INTEGER
);
CREATE TABLE run (
    id                 INTEGER PRIMARY KEY,
    campaign_id        INTEGER NOT NULL REFERENCES campaign (id) ON DELETE CASCADE,
    position           INTEGER NOT NULL,
    protocol           TEXT NOT NULL,
    mechanism          TEXT NOT NULL,
    msg_size           INTEGER NOT NULL,
    total_bytes        INTEGER NOT NULL,
    repeat_index       INTEGER NOT NULL,
    session            INTEGER NOT NULL,
    client_messages    INTEGER NOT NULL,
    client_bytes       INTEGER NOT NULL,
    client_elapsed_ns  INTEGER NOT NULL,
    server_messages    INTEGER NOT NULL,
    server_bytes       INTEGER NOT NULL,
    server_elapsed_ns  INTEGER NOT NULL,
    run_json           TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// Version 2: where a campaign came from (`run`, or `import` of a file), and an index for
/// per-configuration queries.
const V2: &str = "
ALTER TABLE campaign ADD COLUMN origin TEXT NOT NULL DEFAULT 'run';
CREATE INDEX run_by_configuration ON run (campaign_id, protocol, mechanism, msg_size, total_bytes);
";

/// Version 3: sweeps. The message sizes and totals a campaign planned, as comma lists in plan
/// order (NULL for older campaigns: their one `msg_size` and `total_bytes`).
const V3: &str = "
ALTER TABLE campaign ADD COLUMN msg_sizes TEXT;
ALTER TABLE campaign ADD COLUMN totals TEXT;
";

/// Version 4: runs interrupted in flight (Ctrl-C) are kept as `aborted` rows holding what the
/// client knew when it stopped: the session parameters (`params_json`), no figures. SQLite
/// cannot drop NOT NULL from a column, so the run table is rebuilt with the figures nullable;
/// every older row is a finished run (`complete`).
const V4: &str = "
CREATE TABLE run_v4 (
    id                 INTEGER PRIMARY KEY,
    campaign_id        INTEGER NOT NULL REFERENCES campaign (id) ON DELETE CASCADE,
    position           INTEGER NOT NULL,
    protocol           TEXT NOT NULL,
    mechanism          TEXT NOT NULL,
    msg_size           INTEGER NOT NULL,
    total_bytes        INTEGER NOT NULL,
    repeat_index       INTEGER NOT NULL,
    session            INTEGER,
    client_messages    INTEGER,
    client_bytes       INTEGER,
    client_elapsed_ns  INTEGER,
    server_messages    INTEGER,
    server_bytes       INTEGER,
    server_elapsed_ns  INTEGER,
    run_json           TEXT,
    status             TEXT NOT NULL DEFAULT 'complete' CHECK (status IN ('complete', 'aborted')),
    params_json        TEXT,
    UNIQUE (campaign_id, position),
    CHECK ((status = 'complete') = (run_json IS NOT NULL))
);
INSERT INTO run_v4 (id, campaign_id, position, protocol, mechanism, msg_size, total_bytes,
    repeat_index, session, client_messages, client_bytes, client_elapsed_ns, server_messages,
    server_bytes, server_elapsed_ns, run_json, status)
SELECT id, campaign_id, position, protocol, mechanism, msg_size, total_bytes, repeat_index,
    session, client_messages, client_bytes, client_elapsed_ns, server_messages, server_bytes,
    server_elapsed_ns, run_json, 'complete'
FROM run;
DROP TABLE run;
ALTER TABLE run_v4 RENAME TO run;
CREATE INDEX run_by_configuration ON run (campaign_id, protocol, mechanism, msg_size, total_bytes);
";

/// Version 5: `wirebench dns` campaigns and their results (one per transport x concurrency),
/// kept apart from throughput campaigns: a DNS result has no message size, total or server
/// view. `result_json` is one result of docs/dns-output.schema.json.
const V5: &str = "
CREATE TABLE dns_campaign (
    id                 INTEGER PRIMARY KEY,
    started_at_unix_s  INTEGER NOT NULL,
    finished_at_unix_s INTEGER,
    status             TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'aborted')),
    resolver           TEXT NOT NULL,
    name               TEXT NOT NULL,
    record_type        TEXT NOT NULL,
    transports         TEXT NOT NULL,
    concurrency        TEXT NOT NULL,
    planned_results    INTEGER NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL
);
CREATE TABLE dns_result (
    id             INTEGER PRIMARY KEY,
    campaign_id    INTEGER NOT NULL REFERENCES dns_campaign (id) ON DELETE CASCADE,
    position       INTEGER NOT NULL,
    transport      TEXT NOT NULL,
    concurrency    INTEGER NOT NULL,
    sent           INTEGER NOT NULL,
    answered       INTEGER NOT NULL,
    timeouts       INTEGER NOT NULL,
    result_json    TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// Version 6: liveness. A campaign records which process writes it (`writer_pid`, the host
/// name `writer_host` and the kernel's `writer_boot_id`), so a later command on the same host
/// can tell a campaign whose writer died without a word (SIGKILL, power loss) from one still
/// running, and mark it `interrupted` (a new status). A run stopped before its end (a signal,
/// a server that went away) keeps why (`abort_reason`) and the client's figures so far in the
/// nullable `client_*` columns. SQLite cannot change a CHECK constraint in place, so the
/// campaign table is rebuilt; the migration runner turns foreign keys off around migrations
/// so dropping the old table cascades to no run.
const V6: &str = "
CREATE TABLE campaign_v6 (
    id                 INTEGER PRIMARY KEY,
    started_at_unix_s  INTEGER NOT NULL,
    finished_at_unix_s INTEGER,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    error              TEXT,
    server             TEXT NOT NULL,
    protocols          TEXT NOT NULL,
    mechanisms         TEXT NOT NULL,
    msg_size           INTEGER NOT NULL,
    total_bytes        INTEGER NOT NULL,
    repeat             INTEGER NOT NULL,
    planned_runs       INTEGER NOT NULL,
    parameters_json    TEXT NOT NULL,
    host_name          TEXT,
    kernel             TEXT,
    cpu_model          TEXT,
    wirebench_version  TEXT NOT NULL,
    rmem_max_bytes     INTEGER,
    wmem_max_bytes     INTEGER,
    origin             TEXT NOT NULL DEFAULT 'run',
    msg_sizes          TEXT,
    totals             TEXT,
    writer_pid         INTEGER,
    writer_host        TEXT,
    writer_boot_id     TEXT
);
INSERT INTO campaign_v6 (id, started_at_unix_s, finished_at_unix_s, status, error, server,
    protocols, mechanisms, msg_size, total_bytes, repeat, planned_runs, parameters_json,
    host_name, kernel, cpu_model, wirebench_version, rmem_max_bytes, wmem_max_bytes, origin,
    msg_sizes, totals)
SELECT id, started_at_unix_s, finished_at_unix_s, status, error, server, protocols, mechanisms,
    msg_size, total_bytes, repeat, planned_runs, parameters_json, host_name, kernel, cpu_model,
    wirebench_version, rmem_max_bytes, wmem_max_bytes, origin, msg_sizes, totals
FROM campaign;
DROP TABLE campaign;
ALTER TABLE campaign_v6 RENAME TO campaign;
ALTER TABLE run ADD COLUMN abort_reason TEXT;
";

/// Version 7: `wirebench rr` sweeps (protocols × requests in flight), one row per result, as
/// the DNS sweeps of version 5.
const V7: &str = "
CREATE TABLE rr_campaign (
    id                 INTEGER PRIMARY KEY,
    started_at_unix_s  INTEGER NOT NULL,
    finished_at_unix_s INTEGER,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    server             TEXT NOT NULL,
    protocols          TEXT NOT NULL,
    concurrency        TEXT NOT NULL,
    request_bytes      INTEGER NOT NULL,
    response_bytes     INTEGER NOT NULL,
    flows              INTEGER NOT NULL,
    planned_results    INTEGER NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL
);
CREATE TABLE rr_result (
    id           INTEGER PRIMARY KEY,
    campaign_id  INTEGER NOT NULL REFERENCES rr_campaign (id) ON DELETE CASCADE,
    position     INTEGER NOT NULL,
    protocol     TEXT NOT NULL,
    concurrency  INTEGER NOT NULL,
    sent         INTEGER NOT NULL,
    answered     INTEGER NOT NULL,
    lost         INTEGER NOT NULL,
    result_json  TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// PostgreSQL version 1 (SQLite's `V1`).
const PG_V1: &str = "
CREATE TABLE campaign (
    id                BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    started_at_unix_s BIGINT NOT NULL,
    finished_at_unix_s BIGINT,
    status            TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'aborted')),
    error             TEXT,
    server            TEXT NOT NULL,
    protocols         TEXT NOT NULL,
    mechanisms        TEXT NOT NULL,
    msg_size          BIGINT NOT NULL,
    total_bytes       BIGINT NOT NULL,
    repeat            BIGINT NOT NULL,
    planned_runs      BIGINT NOT NULL,
    parameters_json   TEXT NOT NULL,
    host_name         TEXT,
    kernel            TEXT,
    cpu_model         TEXT,
    wirebench_version TEXT NOT NULL,
    rmem_max_bytes    BIGINT,
    wmem_max_bytes    BIGINT
);
CREATE TABLE run (
    id                 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    campaign_id        BIGINT NOT NULL REFERENCES campaign (id) ON DELETE CASCADE,
    position           BIGINT NOT NULL,
    protocol           TEXT NOT NULL,
    mechanism          TEXT NOT NULL,
    msg_size           BIGINT NOT NULL,
    total_bytes        BIGINT NOT NULL,
    repeat_index       BIGINT NOT NULL,
    session            BIGINT NOT NULL,
    client_messages    BIGINT NOT NULL,
    client_bytes       BIGINT NOT NULL,
    client_elapsed_ns  BIGINT NOT NULL,
    server_messages    BIGINT NOT NULL,
    server_bytes       BIGINT NOT NULL,
    server_elapsed_ns  BIGINT NOT NULL,
    run_json           TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// PostgreSQL version 2 (SQLite's `V2`).
const PG_V2: &str = "
ALTER TABLE campaign ADD COLUMN origin TEXT NOT NULL DEFAULT 'run';
CREATE INDEX run_by_configuration ON run (campaign_id, protocol, mechanism, msg_size, total_bytes);
";

/// PostgreSQL version 4 (SQLite's `V4`): the figures become nullable in place.
const PG_V4: &str = "
ALTER TABLE run
    ALTER COLUMN session DROP NOT NULL,
    ALTER COLUMN client_messages DROP NOT NULL,
    ALTER COLUMN client_bytes DROP NOT NULL,
    ALTER COLUMN client_elapsed_ns DROP NOT NULL,
    ALTER COLUMN server_messages DROP NOT NULL,
    ALTER COLUMN server_bytes DROP NOT NULL,
    ALTER COLUMN server_elapsed_ns DROP NOT NULL,
    ALTER COLUMN run_json DROP NOT NULL,
    ADD COLUMN status TEXT NOT NULL DEFAULT 'complete' CHECK (status IN ('complete', 'aborted')),
    ADD COLUMN params_json TEXT,
    ADD CHECK ((status = 'complete') = (run_json IS NOT NULL));
";

/// PostgreSQL version 5 (SQLite's `V5`).
const PG_V5: &str = "
CREATE TABLE dns_campaign (
    id                 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    started_at_unix_s  BIGINT NOT NULL,
    finished_at_unix_s BIGINT,
    status             TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'aborted')),
    resolver           TEXT NOT NULL,
    name               TEXT NOT NULL,
    record_type        TEXT NOT NULL,
    transports         TEXT NOT NULL,
    concurrency        TEXT NOT NULL,
    planned_results    BIGINT NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL
);
CREATE TABLE dns_result (
    id             BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    campaign_id    BIGINT NOT NULL REFERENCES dns_campaign (id) ON DELETE CASCADE,
    position       BIGINT NOT NULL,
    transport      TEXT NOT NULL,
    concurrency    BIGINT NOT NULL,
    sent           BIGINT NOT NULL,
    answered       BIGINT NOT NULL,
    timeouts       BIGINT NOT NULL,
    result_json    TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// PostgreSQL version 6 (SQLite's `V6`): the status check is replaced in place.
const PG_V6: &str = "
ALTER TABLE campaign
    DROP CONSTRAINT campaign_status_check,
    ADD CONSTRAINT campaign_status_check
        CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    ADD COLUMN writer_pid BIGINT,
    ADD COLUMN writer_host TEXT,
    ADD COLUMN writer_boot_id TEXT;
ALTER TABLE run ADD COLUMN abort_reason TEXT;
";

/// PostgreSQL version 7 (SQLite's `V7`).
const PG_V7: &str = "
CREATE TABLE rr_campaign (
    id                 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    started_at_unix_s  BIGINT NOT NULL,
    finished_at_unix_s BIGINT,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    server             TEXT NOT NULL,
    protocols          TEXT NOT NULL,
    concurrency        TEXT NOT NULL,
    request_bytes      BIGINT NOT NULL,
    response_bytes     BIGINT NOT NULL,
    flows              BIGINT NOT NULL,
    planned_results    BIGINT NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL
);
CREATE TABLE rr_result (
    id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    campaign_id  BIGINT NOT NULL REFERENCES rr_campaign (id) ON DELETE CASCADE,
    position     BIGINT NOT NULL,
    protocol     TEXT NOT NULL,
    concurrency  BIGINT NOT NULL,
    sent         BIGINT NOT NULL,
    answered     BIGINT NOT NULL,
    lost         BIGINT NOT NULL,
    result_json  TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// Version 8: `wirebench rpm` campaigns (one responsiveness test each, or more), one row per
/// test; `result_json` is one document of docs/rpm-output.schema.json, with every interval's
/// goodput and probe round trips (the time series the report charts).
const V8: &str = "
CREATE TABLE rpm_campaign (
    id                 INTEGER PRIMARY KEY,
    started_at_unix_s  INTEGER NOT NULL,
    finished_at_unix_s INTEGER,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    server             TEXT NOT NULL,
    direction          TEXT NOT NULL,
    protocol           TEXT NOT NULL,
    max_flows          INTEGER NOT NULL,
    interval_ns        INTEGER NOT NULL,
    max_load_ns        INTEGER NOT NULL,
    planned_results    INTEGER NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL
);
CREATE TABLE rpm_result (
    id           INTEGER PRIMARY KEY,
    campaign_id  INTEGER NOT NULL REFERENCES rpm_campaign (id) ON DELETE CASCADE,
    position     INTEGER NOT NULL,
    rpm          DOUBLE PRECISION,
    load_flows   INTEGER NOT NULL,
    intervals    INTEGER NOT NULL,
    result_json  TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// PostgreSQL version 8 (SQLite's `V8`).
const PG_V8: &str = "
CREATE TABLE rpm_campaign (
    id                 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    started_at_unix_s  BIGINT NOT NULL,
    finished_at_unix_s BIGINT,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    server             TEXT NOT NULL,
    direction          TEXT NOT NULL,
    protocol           TEXT NOT NULL,
    max_flows          BIGINT NOT NULL,
    interval_ns        BIGINT NOT NULL,
    max_load_ns        BIGINT NOT NULL,
    planned_results    BIGINT NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL
);
CREATE TABLE rpm_result (
    id           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    campaign_id  BIGINT NOT NULL REFERENCES rpm_campaign (id) ON DELETE CASCADE,
    position     BIGINT NOT NULL,
    rpm          DOUBLE PRECISION,
    load_flows   BIGINT NOT NULL,
    intervals    BIGINT NOT NULL,
    result_json  TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// Version 9: one lifecycle for every kind. Every campaign table (`campaign`, `dns_campaign`,
/// `rr_campaign`, `rpm_campaign`) holds the same lifecycle columns: why it stopped (`error`),
/// where it came from (`origin`), its writer process (`writer_pid`, `writer_host`,
/// `writer_boot_id`, so a sweep whose process was killed is marked `interrupted` as a run
/// campaign is) and `uid`, the id that follows a campaign between stores, so a later copy or
/// import of its finished version brings the one already there up to date (NULL for older
/// campaigns; unique where set). `rr_campaign.command` says which command measured the sweep,
/// `rr` or `ping`. SQLite cannot change `dns_campaign`'s status CHECK in place (it lacks
/// 'interrupted'), so that table is rebuilt, as version 6 rebuilt `campaign`.
const V9: &str = "
ALTER TABLE campaign ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX campaign_by_uid ON campaign (uid);
CREATE TABLE dns_campaign_v9 (
    id                 INTEGER PRIMARY KEY,
    started_at_unix_s  INTEGER NOT NULL,
    finished_at_unix_s INTEGER,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    resolver           TEXT NOT NULL,
    name               TEXT NOT NULL,
    record_type        TEXT NOT NULL,
    transports         TEXT NOT NULL,
    concurrency        TEXT NOT NULL,
    planned_results    INTEGER NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL,
    error              TEXT,
    origin             TEXT NOT NULL DEFAULT 'run',
    writer_pid         INTEGER,
    writer_host        TEXT,
    writer_boot_id     TEXT,
    uid                TEXT
);
INSERT INTO dns_campaign_v9 (id, started_at_unix_s, finished_at_unix_s, status, resolver, name,
    record_type, transports, concurrency, planned_results, host_name, wirebench_version)
SELECT id, started_at_unix_s, finished_at_unix_s, status, resolver, name, record_type,
    transports, concurrency, planned_results, host_name, wirebench_version
FROM dns_campaign;
DROP TABLE dns_campaign;
ALTER TABLE dns_campaign_v9 RENAME TO dns_campaign;
CREATE UNIQUE INDEX dns_campaign_by_uid ON dns_campaign (uid);
ALTER TABLE rr_campaign ADD COLUMN error TEXT;
ALTER TABLE rr_campaign ADD COLUMN origin TEXT NOT NULL DEFAULT 'run';
ALTER TABLE rr_campaign ADD COLUMN writer_pid INTEGER;
ALTER TABLE rr_campaign ADD COLUMN writer_host TEXT;
ALTER TABLE rr_campaign ADD COLUMN writer_boot_id TEXT;
ALTER TABLE rr_campaign ADD COLUMN uid TEXT;
ALTER TABLE rr_campaign ADD COLUMN command TEXT NOT NULL DEFAULT 'rr'
    CHECK (command IN ('rr', 'ping'));
CREATE UNIQUE INDEX rr_campaign_by_uid ON rr_campaign (uid);
ALTER TABLE rpm_campaign ADD COLUMN error TEXT;
ALTER TABLE rpm_campaign ADD COLUMN origin TEXT NOT NULL DEFAULT 'run';
ALTER TABLE rpm_campaign ADD COLUMN writer_pid INTEGER;
ALTER TABLE rpm_campaign ADD COLUMN writer_host TEXT;
ALTER TABLE rpm_campaign ADD COLUMN writer_boot_id TEXT;
ALTER TABLE rpm_campaign ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX rpm_campaign_by_uid ON rpm_campaign (uid);
";

/// PostgreSQL version 9 (SQLite's `V9`): the DNS status check is replaced in place.
const PG_V9: &str = "
ALTER TABLE campaign ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX campaign_by_uid ON campaign (uid);
ALTER TABLE dns_campaign
    DROP CONSTRAINT dns_campaign_status_check,
    ADD CONSTRAINT dns_campaign_status_check
        CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    ADD COLUMN error TEXT,
    ADD COLUMN origin TEXT NOT NULL DEFAULT 'run',
    ADD COLUMN writer_pid BIGINT,
    ADD COLUMN writer_host TEXT,
    ADD COLUMN writer_boot_id TEXT,
    ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX dns_campaign_by_uid ON dns_campaign (uid);
ALTER TABLE rr_campaign
    ADD COLUMN error TEXT,
    ADD COLUMN origin TEXT NOT NULL DEFAULT 'run',
    ADD COLUMN writer_pid BIGINT,
    ADD COLUMN writer_host TEXT,
    ADD COLUMN writer_boot_id TEXT,
    ADD COLUMN uid TEXT,
    ADD COLUMN command TEXT NOT NULL DEFAULT 'rr' CHECK (command IN ('rr', 'ping'));
CREATE UNIQUE INDEX rr_campaign_by_uid ON rr_campaign (uid);
ALTER TABLE rpm_campaign
    ADD COLUMN error TEXT,
    ADD COLUMN origin TEXT NOT NULL DEFAULT 'run',
    ADD COLUMN writer_pid BIGINT,
    ADD COLUMN writer_host TEXT,
    ADD COLUMN writer_boot_id TEXT,
    ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX rpm_campaign_by_uid ON rpm_campaign (uid);
";

/// Version 10: a UDP run's loss and where it went (`record::loss`): dropped by the receiving
/// host, not sent by the sending host, lost on the path, in messages, so a query can find the
/// runs whose loss was the hosts' own. NULL for runs of other protocols, for the shares of a
/// run whose receiver could not tell, and for runs stored before (their documents hold the
/// loss; no split was measured).
const V10: &str = "
ALTER TABLE run ADD COLUMN udp_lost INTEGER;
ALTER TABLE run ADD COLUMN udp_lost_receiving_host INTEGER;
ALTER TABLE run ADD COLUMN udp_lost_sending_host INTEGER;
ALTER TABLE run ADD COLUMN udp_lost_path INTEGER;
";

/// PostgreSQL version 10 (SQLite's `V10`).
const PG_V10: &str = "
ALTER TABLE run ADD COLUMN udp_lost BIGINT;
ALTER TABLE run ADD COLUMN udp_lost_receiving_host BIGINT;
ALTER TABLE run ADD COLUMN udp_lost_sending_host BIGINT;
ALTER TABLE run ADD COLUMN udp_lost_path BIGINT;
";

/// Version 11: `wirebench latency` campaigns (latency under load by direction), one row per
/// test, with the lifecycle columns every campaign table holds since version 9. `plan_json` is
/// the test's plan (probes, load, phase time); `result_json` one document of
/// docs/latency-output.schema.json, with every probe (the time series the report charts);
/// `clock_bound_ns` the bound every one-way figure of the test carries (NULL without stamped
/// probes).
const V11: &str = "
CREATE TABLE latency_campaign (
    id                 INTEGER PRIMARY KEY,
    started_at_unix_s  INTEGER NOT NULL,
    finished_at_unix_s INTEGER,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    server             TEXT NOT NULL,
    phases             TEXT NOT NULL,
    plan_json          TEXT NOT NULL,
    planned_results    INTEGER NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL,
    error              TEXT,
    origin             TEXT NOT NULL DEFAULT 'run',
    writer_pid         INTEGER,
    writer_host        TEXT,
    writer_boot_id     TEXT,
    uid                TEXT
);
CREATE UNIQUE INDEX latency_campaign_by_uid ON latency_campaign (uid);
CREATE TABLE latency_result (
    id             INTEGER PRIMARY KEY,
    campaign_id    INTEGER NOT NULL REFERENCES latency_campaign (id) ON DELETE CASCADE,
    position       INTEGER NOT NULL,
    phases         INTEGER NOT NULL,
    clock_bound_ns INTEGER,
    result_json    TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";

/// PostgreSQL version 11 (SQLite's `V11`).
const PG_V11: &str = "
CREATE TABLE latency_campaign (
    id                 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    started_at_unix_s  BIGINT NOT NULL,
    finished_at_unix_s BIGINT,
    status             TEXT NOT NULL
                       CHECK (status IN ('running', 'complete', 'failed', 'aborted', 'interrupted')),
    server             TEXT NOT NULL,
    phases             TEXT NOT NULL,
    plan_json          TEXT NOT NULL,
    planned_results    BIGINT NOT NULL,
    host_name          TEXT,
    wirebench_version  TEXT NOT NULL,
    error              TEXT,
    origin             TEXT NOT NULL DEFAULT 'run',
    writer_pid         BIGINT,
    writer_host        TEXT,
    writer_boot_id     TEXT,
    uid                TEXT
);
CREATE UNIQUE INDEX latency_campaign_by_uid ON latency_campaign (uid);
CREATE TABLE latency_result (
    id             BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    campaign_id    BIGINT NOT NULL REFERENCES latency_campaign (id) ON DELETE CASCADE,
    position       BIGINT NOT NULL,
    phases         BIGINT NOT NULL,
    clock_bound_ns BIGINT,
    result_json    TEXT NOT NULL,
    UNIQUE (campaign_id, position)
);
";
