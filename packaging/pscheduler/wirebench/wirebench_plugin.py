"""The wirebench tool plugin for pScheduler: code its executables share.

Tests: `throughput` (`wirebench run`, participants the client and a one-off server) and `rtt`
(`wirebench ping` against a standing wirebench server, one participant), and `latency`
(`wirebench ping --per-probe` against one: each probe's one-way delay, with the bound of the two
hosts' clock offset as max-clock-error).

Standard library only, and Python 3.6 compatible (EL8's), so that the plugin runs on any host
pScheduler runs on without the pscheduler module: the few helpers it needs from there (JSON in
and out, ISO 8601, sleeping until the start) have small equivalents here.

wirebench's output is untrusted text: it is parsed as JSON (never evaluated), NaN and Infinity
are refused, every figure is type- and range-checked before it is passed on, and what goes into
`diags` and `error` is bounded in size and stripped of control characters.
"""

import configparser
import datetime
import ipaddress
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NAME = "wirebench"

# The throughput test's spec schemas this plugin knows (pscheduler-test-throughput: 1 to 7).
MAX_SPEC_SCHEMA = 7

# Timing, in seconds.  As the iperf3 tool: a test without a duration runs 10 s, and setting up
# takes max(1, RTT / 50 ms) seconds, the RTT being the spec's link-rtt or 200 ms.
DEFAULT_DURATION = 10
DEFAULT_LINK_RTT = 0.2
# The client's first try is this long after the start (the server starts at the start) ...
SERVER_START_WAIT = 1.0
# ... and a refused connection (the server not listening yet) is tried again for this long.
CONNECT_RETRY_WINDOW = 2.0
CONNECT_RETRY_PAUSE = 0.5
# Beyond setup + omit + duration, what one client attempt and a server session may take.
RUN_SLACK = 2.0
# The end: a stopped process's grace, the server's stop, the result written.
TEARDOWN = 2.0
# A process told to stop (SIGTERM) is killed after this long.
KILL_GRACE = 1.0
# Longest duration + omit accepted.
MAX_TEST_SECONDS = 86400

# The port participant 1's one-off server listens on, unless the configuration says another.
# Not 5310, which a wirebench-server service on the same host takes.
DEFAULT_SERVER_PORT = 5311
# single-ended: a standing wirebench server, on its default port unless single-ended-port.
SINGLE_ENDED_DEFAULT_PORT = 5310
# rtt: the standing wirebench server (the wirebench-server service) at the destination, on
# this port unless the spec's port or the configuration's rtt_port says another.
DEFAULT_RTT_PORT = 5310

# The first of these that exists (EL packages put tool configuration in /etc/pscheduler/tool/,
# Debian's in a directory of the tool's name there).
CONFIG_FILES = ("/etc/pscheduler/tool/wirebench.conf", "/etc/pscheduler/tool/wirebench/wirebench.conf")
# Another configuration file (tests).
CONFIG_ENV = "WIREBENCH_PSCHEDULER_CONF"

# Bounds on what is read and passed on.
MAX_INPUT = 1 << 20
MAX_OUTPUT = 16 << 20
MAX_DOC_IN_DIAGS = 1 << 20
MAX_DIAGS = 2 << 20
MAX_TEXT = 16 << 10
MAX_ERROR = 4 << 10
MAX_INTERVALS = 100000
MAX_STREAMS = 256

# wirebench's own limits.
MAX_PARALLEL = 128
MSS_RANGE = (88, 65495)
MAX_UDP_LENGTH = 65491
MAX_TCP_LENGTH = 16 << 20
MIN_INTERVAL = 0.01
# iperf3's default rate for UDP when the spec gives no bandwidth (wirebench's own is unpaced).
DEFAULT_UDP_RATE = 1000000


# ---------------------------------------------------------------------------------------------
# Input, output, failure

def fail(message, status=1):
    """Say why on standard error and exit non-zero, as pscheduler.fail() does."""
    sys.stderr.write(clean_text(str(message), MAX_ERROR) + "\n")
    sys.exit(status)


def _refuse_constant(name):
    raise ValueError("%s is not a JSON number" % name)


def parse_json(text):
    """Parse JSON text, refusing NaN and Infinity (Python's json takes them)."""
    return json.loads(text, parse_constant=_refuse_constant)


def read_input():
    """The JSON object on standard input, bounded; exits on anything else."""
    data = sys.stdin.buffer.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        fail("Input is larger than %d bytes" % MAX_INPUT)
    try:
        value = parse_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as ex:
        fail("Invalid JSON on standard input: %s" % ex)
    if not isinstance(value, dict):
        fail("Input must be a JSON object")
    return value


def succeed(value):
    """Print a JSON value on standard output and exit 0, as pscheduler.succeed_json() does."""
    sys.stdout.write(json.dumps(value, indent=4, sort_keys=True, allow_nan=False) + "\n")
    sys.stdout.flush()
    sys.exit(0)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_text(text, limit):
    """Text without control characters (newlines and tabs stay), at most `limit` characters."""
    text = _CONTROL.sub("?", text)
    if len(text) > limit:
        text = text[:limit] + "\n[... %d more characters left out]" % (len(text) - limit)
    return text


# ---------------------------------------------------------------------------------------------
# ISO 8601

_DURATION = re.compile(
    r"^P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def iso8601_seconds(text):
    """Seconds in an ISO 8601 duration as pScheduler's Duration type takes them (no years or
    months, no repeats): PT10S, PT1M30S, P1DT2H, PT0.5S."""
    if not isinstance(text, str) or len(text) > 64:
        raise ValueError("not an ISO 8601 duration: %r" % (text,))
    match = _DURATION.match(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        raise ValueError("not an ISO 8601 duration: %r" % (text,))
    weeks, days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds


def seconds_as_iso8601(seconds):
    """Whole seconds, rounded up: PT21S."""
    return "PT%dS" % int(math.ceil(seconds))


_DATETIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?$")


def iso8601_epoch(text):
    """Seconds since the epoch of an ISO 8601 time (pScheduler's schedule start); one without
    a zone is local time."""
    match = _DATETIME.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("not an ISO 8601 time: %r" % (text,))
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = match.group(7)
    micro = int((fraction + "000000")[:6]) if fraction else 0
    zone = match.group(8)
    tz = None
    if zone == "Z":
        tz = datetime.timezone.utc
    elif zone:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) > 2 else 0)
        tz = datetime.timezone(sign * datetime.timedelta(minutes=offset))
    when = datetime.datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    return when.timestamp()


def sleep_until(epoch):
    """Sleep until a time (seconds since the epoch); at once if it has passed."""
    while True:
        left = epoch - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 1.0))


# ---------------------------------------------------------------------------------------------
# Configuration and the binary

def get_config():
    """The plugin's settings: /etc/pscheduler/tool/wirebench.conf (or .../wirebench/wirebench.conf,
    or $WIREBENCH_PSCHEDULER_CONF), section [wirebench]: wirebench_cmd, server_port, server_bind,
    rtt_port, rtt_psk_file.  No file: the defaults."""
    config = {
        "wirebench_cmd": None,
        "server_port": DEFAULT_SERVER_PORT,
        "server_bind": None,
        "rtt_port": DEFAULT_RTT_PORT,
        "rtt_psk_file": None,
    }
    path = os.environ.get(CONFIG_ENV) \
        or next((p for p in CONFIG_FILES if os.path.exists(p)), CONFIG_FILES[0])
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except (configparser.Error, OSError, UnicodeDecodeError) as ex:
        fail("Unable to read %s: %s" % (path, ex))
    if not parser.has_section(NAME):
        return config
    section = parser[NAME]
    if section.get("wirebench_cmd"):
        config["wirebench_cmd"] = section.get("wirebench_cmd").strip()
    for key in ("server_port", "rtt_port"):
        if section.get(key):
            try:
                port = int(section.get(key))
            except ValueError:
                port = 0
            if not 1 <= port <= 65535:
                fail("%s: %s must be a port number (1 to 65535)" % (path, key))
            config[key] = port
    if section.get("rtt_psk_file"):
        key_file = section.get("rtt_psk_file").strip()
        if not os.path.isabs(key_file):
            fail("%s: rtt_psk_file must be an absolute path" % path)
        config["rtt_psk_file"] = key_file
    if section.get("server_bind"):
        bind = section.get("server_bind").strip()
        if ip_version_of(bind) is None:
            fail("%s: server_bind must be an IP address" % path)
        config["server_bind"] = bind
    return config


def wirebench_cmd(config):
    """The wirebench binary: the configured one, else `wirebench` on the PATH."""
    return config.get("wirebench_cmd") or shutil.which(NAME) or "/usr/bin/wirebench"


_VERSION = re.compile(r"^wirebench\s+([0-9]+(?:\.[0-9]+)*[A-Za-z0-9+-]*)\s*$")


def wirebench_version(cmd):
    """The version `wirebench --version` prints (e.g. 0.1.0), or None with the reason."""
    try:
        proc = subprocess.run([cmd, "--version"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=5)
    except (OSError, subprocess.SubprocessError) as ex:
        return None, "cannot run %s --version: %s" % (cmd, ex)
    first = proc.stdout[:200].decode("utf-8", "replace").strip().split("\n")[0]
    match = _VERSION.match(first)
    if proc.returncode != 0 or match is None:
        return None, "%s --version said %r (status %d)" % (cmd, first[:80], proc.returncode)
    return match.group(1), None


# ---------------------------------------------------------------------------------------------
# Hosts and addresses

_HOSTNAME = re.compile(
    r"^(?=.{1,253}\.?$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?$")


def ip_version_of(text):
    """4 or 6 for an IP address literal, else None."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).version
    except (ValueError, AttributeError):
        return None


def valid_host(text):
    return isinstance(text, str) and (ip_version_of(text) is not None
                                      or _HOSTNAME.match(text) is not None)


def host_port(host, port):
    """HOST:PORT as wirebench's --server takes it ([ADDR]:PORT for IPv6)."""
    if ":" in host:
        return "[%s]:%d" % (host, port)
    return "%s:%d" % (host, port)


def resolve(host, family=socket.AF_UNSPEC):
    """The addresses of a host (an address literal stays itself), as {4: [...], 6: [...]}."""
    found = {4: [], 6: []}
    version = ip_version_of(host)
    if version is not None:
        found[version].append(host)
        return found
    try:
        infos = socket.getaddrinfo(host, None, family, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return found
    for info in infos:
        addr = info[4][0]
        version = 6 if info[0] == socket.AF_INET6 else 4
        if addr not in found[version]:
            found[version].append(addr)
    return found


def pick_addresses(local, dest, ip_version):
    """The local address to bind (from a name or address) and the destination in one family:
    the spec's ip-version, else IPv6 where both have it, else IPv4 (as pScheduler's
    ip_normalize_version).  Returns (local_ip, dest_ip) or raises ValueError."""
    mine = resolve(local)
    theirs = resolve(dest)
    versions = [ip_version] if ip_version else [6, 4]
    for version in versions:
        if mine[version] and theirs[version]:
            # A literal destination stays as given; a name goes to wirebench as the address
            # picked, so that both ends are in one family.
            return mine[version][0], theirs[version][0]
    raise ValueError("%s and %s have no address family in common%s"
                     % (local, dest, " (IPv%d)" % ip_version if ip_version else ""))


def ipv6_available():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::", 0))
        return True
    except OSError:
        return False


def server_bind(config, spec):
    """Where participant 1's server listens: the configured server_bind, else every address
    of the spec's ip-version, else every address (:: where the host has IPv6)."""
    if config.get("server_bind"):
        return config["server_bind"]
    if spec.get("ip-version") == 4:
        return "0.0.0.0"
    if spec.get("ip-version") == 6:
        return "::"
    return "::" if ipv6_available() else "0.0.0.0"


# ---------------------------------------------------------------------------------------------
# The spec

def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _int_in(low, high):
    def check(value):
        if not is_int(value) or value < low or (high is not None and value > high):
            if high is None:
                return "must be an integer of at least %d" % low
            return "must be an integer from %d to %d" % (low, high)
        return None
    return check


def _boolean(value):
    return None if isinstance(value, bool) else "must be true or false"


def _host(value):
    return None if valid_host(value) else "must be a host name or an IP address"


def _duration(low):
    def check(value):
        try:
            seconds = iso8601_seconds(value)
        except ValueError as ex:
            return str(ex)
        if seconds < low or seconds > MAX_TEST_SECONDS:
            return "must be from %gs to %ds" % (low, MAX_TEST_SECONDS) if low > 0 else \
                "must be at most %ds" % MAX_TEST_SECONDS
        return None
    return check


def _positive_duration(value):
    try:
        seconds = iso8601_seconds(value)
    except ValueError as ex:
        return str(ex)
    if seconds <= 0 or seconds > MAX_TEST_SECONDS:
        return "must be longer than 0s and at most %ds" % MAX_TEST_SECONDS
    return None


def _any_string(value):
    return None if isinstance(value, str) and len(value) <= 1024 else "must be a string"


_CONGESTION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}$")


def _congestion(value):
    if isinstance(value, str) and _CONGESTION.match(value):
        return None
    return "must be a congestion control's name (letters, digits, _ . -; at most 16)"


def _false_only(what):
    def check(value):
        if value is False:
            return None
        if value is True:
            return "wirebench has no %s" % what
        return "must be true or false"
    return check


def _refused(reason):
    def check(value):
        return reason
    return check


# Every field of the throughput spec (schemas 1 to 7): a check of its value that returns None
# when wirebench can do it, else the reason why not.  The option each maps to is in
# client_args() and in README.md.
SPEC_FIELDS = {
    "schema": _int_in(1, MAX_SPEC_SCHEMA),
    "source": _host,
    "source-node": _any_string,
    "dest": _host,
    "dest-node": _any_string,
    "duration": _positive_duration,
    "interval": _duration(MIN_INTERVAL),
    "link-rtt": _duration(0),
    "parallel": _int_in(1, MAX_PARALLEL),
    "udp": _boolean,
    "bandwidth": _int_in(1, None),
    "bandwidth-strict": _false_only("strict bandwidth mode"),
    "burst-size": _refused("wirebench has no burst mode (iperf3's -b RATE/BURST)"),
    "fq-rate": _int_in(1, None),
    "window-size": _int_in(1, 1 << 31),
    "mss": _int_in(*MSS_RANGE),
    "buffer-length": _int_in(1, MAX_TCP_LENGTH),
    "ip-tos": _int_in(0, 255),
    "ip-version": lambda v: None if v in (4, 6) and is_int(v) else "must be 4 or 6",
    "local-address": _host,
    "omit": _duration(0),
    "no-delay": _boolean,
    "congestion": _congestion,
    "zero-copy": _false_only("zero-copy mode (iperf3's -Z)"),
    "flow-label": _refused("wirebench cannot set the IPv6 flow label (iperf3's -L)"),
    "client-cpu-affinity": _int_in(0, None),
    "server-cpu-affinity": _refused(
        "wirebench's server has no CPU affinity option (pin the wirebench-server service "
        "with taskset or CPUAffinity= instead)"),
    "single-ended": _boolean,
    "single-ended-port": _int_in(1, 65535),
    "reverse": _boolean,
    "reverse-connections": _false_only("reversed connections (the client always connects "
                                       "to the server)"),
    "loopback": _boolean,
}


def field_reasons(spec, fields):
    """One reason per field of `spec` that `fields` (name -> check) refuses or does not know,
    in the order of the field names."""
    reasons = []
    for field in sorted(spec):
        check = fields.get(field)
        if check is None:
            reasons.append("wirebench does not support the %s option"
                           % clean_text(str(field), 64))
            continue
        problem = check(spec[field])
        if problem is not None:
            reasons.append("%s: %s" % (field, problem) if problem.startswith("wirebench")
                           else "%s %s" % (field, problem))
    return reasons


def spec_reasons(spec):
    """Why wirebench cannot run this throughput spec: an empty list when it can."""
    if not isinstance(spec, dict):
        return ["The test spec must be a JSON object"]
    reasons = []
    schema = spec.get("schema", 1)
    if not is_int(schema) or not 1 <= schema <= MAX_SPEC_SCHEMA:
        reasons.append("Spec schema %r is not supported (1 to %d)" % (schema, MAX_SPEC_SCHEMA))
    if "dest" not in spec:
        reasons.append("The spec has no dest")
    reasons.extend(field_reasons(spec, SPEC_FIELDS))
    # Combinations (of values that passed their own checks).
    udp = spec.get("udp") is True
    if udp and "fq-rate" in spec:
        reasons.append("fq-rate paces TCP only; for UDP give bandwidth")
    if "fq-rate" in spec and "bandwidth" in spec:
        reasons.append("Cannot have bandwidth and fq-rate set simultaneously")
    length = spec.get("buffer-length")
    if udp and is_int(length) and length > MAX_UDP_LENGTH:
        reasons.append("buffer-length must be at most %d for UDP (one datagram)" % MAX_UDP_LENGTH)
    if udp and "mss" in spec:
        reasons.append("mss applies to TCP only (wirebench refuses -M for UDP)")
    if spec.get("single-ended") and spec.get("loopback"):
        reasons.append("single-ended and loopback cannot both be set")
    try:
        total = iso8601_seconds(spec.get("duration") or "PT%dS" % DEFAULT_DURATION) \
            + iso8601_seconds(spec.get("omit") or "PT0S")
        if total > MAX_TEST_SECONDS:
            reasons.append("duration and omit together must be at most %ds" % MAX_TEST_SECONDS)
    except ValueError:
        pass  # said above
    return reasons


class Timeline(object):
    """How long each part of a run may take, in seconds from the scheduled start."""

    def __init__(self, spec):
        self.duration = iso8601_seconds(spec["duration"]) if spec.get("duration") \
            else float(DEFAULT_DURATION)
        self.omit = iso8601_seconds(spec["omit"]) if spec.get("omit") else 0.0
        rtt = iso8601_seconds(spec["link-rtt"]) if spec.get("link-rtt") else DEFAULT_LINK_RTT
        self.setup = max(rtt * 1000.0 / 50.0, 1.0)
        self.interval = iso8601_seconds(spec["interval"]) if spec.get("interval") else 1.0
        single = bool(spec.get("single-ended"))
        # A standing server (single-ended) is there already: no wait, no retries.
        self.first_try = 0.0 if single else SERVER_START_WAIT
        self.retry_until = 0.0 if single else SERVER_START_WAIT + CONNECT_RETRY_WINDOW
        # One client attempt, and the longest a server session may run.
        self.attempt = self.setup + self.omit + self.duration + RUN_SLACK
        # When participant 1's server is told to stop if its session has not ended.
        self.server_deadline = self.retry_until + self.attempt + KILL_GRACE
        # What the `duration` method says.
        self.total = self.retry_until + self.attempt + TEARDOWN


# ---------------------------------------------------------------------------------------------
# Processes

_CHILDREN = []


class Stopped(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived (pScheduler's runner stops a run that overruns)."""


def _on_signal(signum, frame):
    raise Stopped("stopped by signal %d" % signum)


def catch_signals():
    """Turn stop signals into Stopped, so that the wirebench processes started are ended."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)


class Process(object):
    """A wirebench process started by this plugin, its output going to unnamed temporary
    files (no pipe to fill up, memory bounded)."""

    def __init__(self, argv):
        self.argv = argv
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.out,
                                     stderr=self.err, close_fds=True)
        _CHILDREN.append(self)
        self.timed_out = False

    def wait(self, timeout):
        """Wait up to `timeout` seconds; then SIGTERM, and SIGKILL after KILL_GRACE."""
        try:
            return self.proc.wait(timeout=max(timeout, 0.01))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            return self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=KILL_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()

    def output(self, which, limit):
        """(text, whole) of stdout or stderr, at most `limit` bytes read."""
        handle = self.out if which == "stdout" else self.err
        handle.seek(0)
        data = handle.read(limit + 1)
        return data[:limit].decode("utf-8", "replace"), len(data) <= limit

    def close(self):
        self.out.close()
        self.err.close()


def stop_children():
    """End every wirebench process this plugin started that still runs (by its own handle)."""
    for child in _CHILDREN:
        try:
            child.stop()
        except (OSError, Stopped):
            pass


class SecretFile(object):
    """A pre-shared key in a file only this user reads, removed on close."""

    def __init__(self, key):
        self.dir = tempfile.mkdtemp(prefix="wirebench-psk-")
        self.path = os.path.join(self.dir, "psk")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(key + "\n")

    def close(self):
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass


_PSK = re.compile(r"^[A-Za-z0-9_-]{22,256}$")


def new_psk():
    return secrets.token_urlsafe(32)


def valid_psk(value):
    return isinstance(value, str) and _PSK.match(value) is not None


# ---------------------------------------------------------------------------------------------
# wirebench's command lines

def _ms(seconds):
    return "%dms" % int(round(seconds * 1000))


def client_args(cmd, spec, timeline, dest, port, bind=None, psk_path=None):
    """`wirebench run` for a spec: iperf3's -J document (--iperf3-shape), an interval every
    spec interval (1 s by default), nothing stored.  Every value is passed as --option=VALUE,
    so that none can be taken for an option."""
    args = [cmd, "run", "--server=" + host_port(dest, port),
            # iperf3 adds -O to -t; wirebench's -t is the whole run, -O the part left out.
            "--time=" + _ms(timeline.duration + timeline.omit),
            "--json", "--iperf3-shape", "--interval=" + _ms(timeline.interval),
            "--no-store", "--quiet"]
    if timeline.omit > 0:
        args.append("--omit=" + _ms(timeline.omit))
    if spec.get("ip-version") == 4:
        args.append("--ipv4")
    elif spec.get("ip-version") == 6:
        args.append("--ipv6")
    if bind:
        args.append("--bind=" + bind)
    if spec.get("udp"):
        args.append("--udp")
        args.append("--rate=%dbit" % spec.get("bandwidth", DEFAULT_UDP_RATE))
    elif "bandwidth" in spec:
        args.append("--rate=%dbit" % spec["bandwidth"])
    if "fq-rate" in spec:
        args.append("--fq-rate=%dbit" % spec["fq-rate"])
    if "parallel" in spec:
        args.append("--parallel=%d" % spec["parallel"])
    if spec.get("reverse"):
        args.append("--reverse")
    if "window-size" in spec:
        args.append("--window=%d" % spec["window-size"])
    if "mss" in spec:
        args.append("--set-mss=%d" % spec["mss"])
    if "buffer-length" in spec:
        args.append("--msg-size=%d" % spec["buffer-length"])
    if "ip-tos" in spec:
        args.append("--tos=%d" % spec["ip-tos"])
    if "congestion" in spec:
        args.append("--congestion=" + spec["congestion"])
    if spec.get("no-delay"):
        args.append("--nodelay")
    if "client-cpu-affinity" in spec:
        args.append("--affinity=%d" % spec["client-cpu-affinity"])
    if psk_path:
        args.append("--psk=" + psk_path)
    return args


def server_args(cmd, bind, port, timeline, psk_path=None):
    """`wirebench server -1`: one session (its flows, with -P), then it stops."""
    args = [cmd, "server", "--one-off", "--bind=" + bind, "--port=%d" % port,
            "--max-duration=%ds" % int(math.ceil(timeline.attempt))]
    if psk_path:
        args.append("--psk=" + psk_path)
    return args


# ---------------------------------------------------------------------------------------------
# wirebench's iperf3-shaped document -> pScheduler's throughput result

class BadOutput(ValueError):
    pass


def _number(obj, key, where, required=False):
    value = obj.get(key)
    if value is None:
        if required:
            raise BadOutput("%s has no %s" % (where, key))
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise BadOutput("%s: %s is not a non-negative number" % (where, key))
    return value


def _count(obj, key, where, required=False):
    value = obj.get(key)
    if value is None:
        if required:
            raise BadOutput("%s has no %s" % (where, key))
        return None
    if not is_int(value) or value < 0:
        raise BadOutput("%s: %s is not a non-negative integer" % (where, key))
    return value


def _object(obj, key, where):
    value = obj.get(key)
    if not isinstance(value, dict):
        raise BadOutput("%s has no %s object" % (where, key))
    return value


def _stream_id(value, fallback):
    if is_int(value):
        return value
    if isinstance(value, str) and 0 < len(value) <= 64:
        return clean_text(value, 64)
    return fallback


def _data(obj, where, udp, stream_id=None):
    """One throughput-data object of the result from one of iperf3's interval or sum objects."""
    data = {
        "start": _number(obj, "start", where, required=True),
        "end": _number(obj, "end", where, required=True),
        "throughput-bytes": _count(obj, "bytes", where, required=True),
        "throughput-bits": _number(obj, "bits_per_second", where, required=True),
    }
    if stream_id is not None:
        data["stream-id"] = stream_id
    omitted = obj.get("omitted")
    if isinstance(omitted, bool):
        data["omitted"] = omitted
    if udp:
        sent = _count(obj, "packets", where)
        lost = _count(obj, "lost_packets", where)
        jitter = _number(obj, "jitter_ms", where)
        if sent is not None:
            data["sent"] = sent
        if lost is not None:
            data["lost"] = lost
        if jitter is not None:
            data["jitter"] = jitter
    else:
        retransmits = _count(obj, "retransmits", where)
        window = _count(obj, "snd_cwnd", where)
        rtt = _number(obj, "rtt", where)
        if rtt is None:
            rtt = _number(obj, "mean_rtt", where)
        if retransmits is not None:
            data["retransmits"] = retransmits
        if window is not None:
            data["tcp-window-size"] = window
        if rtt is not None:
            # Microseconds, as iperf3 reports it and its tool passes it on.
            data["rtt"] = rtt
    return data


def convert(doc, udp):
    """pScheduler's throughput result (succeeded, intervals, summary) from the iperf3-shaped
    document of one run.  The summary is what the receiver got (goodput): throughput-bytes is
    end.sum_received.bytes; retransmits are the sender's; UDP's sent, lost and jitter are
    those of iperf3's end.sum.  Raises BadOutput."""
    if not isinstance(doc, dict):
        raise BadOutput("the document is not a JSON object")
    intervals = doc.get("intervals")
    if not isinstance(intervals, list):
        raise BadOutput("the document has no intervals")
    if len(intervals) > MAX_INTERVALS:
        raise BadOutput("the document has more than %d intervals" % MAX_INTERVALS)
    end = _object(doc, "end", "the document")

    result_intervals = []
    for i, interval in enumerate(intervals):
        where = "intervals[%d]" % i
        if not isinstance(interval, dict):
            raise BadOutput("%s is not an object" % where)
        streams = interval.get("streams", [])
        if not isinstance(streams, list) or len(streams) > MAX_STREAMS:
            raise BadOutput("%s.streams is not a list of at most %d" % (where, MAX_STREAMS))
        result_streams = []
        for j, stream in enumerate(streams):
            swhere = "%s.streams[%d]" % (where, j)
            if not isinstance(stream, dict):
                raise BadOutput("%s is not an object" % swhere)
            result_streams.append(
                _data(stream, swhere, udp, _stream_id(stream.get("socket"), j + 1)))
        summary = _data(_object(interval, "sum", where), where + ".sum", udp)
        result_intervals.append({"streams": result_streams, "summary": summary})

    received = _object(end, "sum_received", "end")
    sent_sum = end.get("sum_sent") if isinstance(end.get("sum_sent"), dict) else {}
    summary = _data(received, "end.sum_received", udp)
    summary["receiver-throughput-bits"] = summary["throughput-bits"]
    summary.pop("omitted", None)
    if udp:
        udp_sum = end.get("sum") if isinstance(end.get("sum"), dict) else sent_sum
        for key, source, kind in (("sent", "packets", _count), ("lost", "lost_packets", _count),
                                  ("jitter", "jitter_ms", _number)):
            value = kind(udp_sum, source, "end.sum")
            if value is not None:
                summary[key] = value
    else:
        summary.pop("tcp-window-size", None)
        retransmits = _count(sent_sum, "retransmits", "end.sum_sent")
        if retransmits is not None:
            summary["retransmits"] = retransmits

    end_streams = end.get("streams", [])
    if not isinstance(end_streams, list) or len(end_streams) > MAX_STREAMS:
        raise BadOutput("end.streams is not a list of at most %d" % MAX_STREAMS)
    summary_streams = []
    rtts = []
    for j, stream in enumerate(end_streams):
        where = "end.streams[%d]" % j
        if not isinstance(stream, dict):
            raise BadOutput("%s is not an object" % where)
        if udp:
            side = _object(stream, "udp", where)
            data = _data(side, where + ".udp", True, _stream_id(side.get("socket"), j + 1))
        else:
            side = _object(stream, "receiver", where)
            data = _data(side, where + ".receiver", False, _stream_id(side.get("socket"), j + 1))
            sender = stream.get("sender") if isinstance(stream.get("sender"), dict) else {}
            retransmits = _count(sender, "retransmits", where + ".sender")
            rtt = _number(sender, "mean_rtt", where + ".sender")
            if retransmits is not None:
                data["retransmits"] = retransmits
            if rtt is not None:
                data["rtt"] = rtt
                rtts.append(rtt)
        data["receiver-throughput-bits"] = data["throughput-bits"]
        summary_streams.append(data)
    if rtts and "rtt" not in summary:
        summary["rtt"] = sum(rtts) / len(rtts)

    return {
        "succeeded": True,
        "intervals": result_intervals,
        "summary": {"streams": summary_streams, "summary": summary},
    }


def document_for_diags(doc):
    """The document, re-serialised from what was parsed (no text of wirebench's passed on
    unparsed), whole when small, else its start and end alone."""
    text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False)
    if len(text) <= MAX_DOC_IN_DIAGS:
        return text
    brief = {key: doc.get(key) for key in ("start", "end") if isinstance(doc, dict)}
    brief["intervals"] = "[%d intervals left out of the diagnostics]" % len(doc.get("intervals", []))
    return json.dumps(brief, indent=1, sort_keys=True, allow_nan=False)[:MAX_DOC_IN_DIAGS]


# Where the document starts in the client's diags (.ci/pscheduler-check reads it back).
DOC_MARKER = "wirebench -J document:"


def failure(error, diags=""):
    return {"succeeded": False, "error": clean_text(error, MAX_ERROR),
            "diags": clean_text(diags, MAX_DIAGS)}


# =============================================================================================
# The test types

# What enumerate claims.
TESTS = ("throughput", "rtt", "latency")

def test_reasons(test_type, spec, config=None):
    """Why wirebench cannot run a test of this type and spec: an empty list when it can."""
    if test_type == "throughput":
        return spec_reasons(spec)
    if test_type == "rtt":
        return rtt_spec_reasons(spec, config)
    if test_type == "latency":
        return latency_spec_reasons(spec, config)
    return ["Unsupported test type %s: wirebench runs %s"
            % (clean_text(repr(test_type), 64), ", ".join(TESTS))]


# =============================================================================================
# rtt: `wirebench ping` against a standing wirebench server
#
# pScheduler's rtt test has one participant, the host that pings (source-node, else source,
# else the host the task is given to).  wirebench ping needs a wirebench server at the
# destination: the wirebench-server service on port 5310 (rtt_port in the configuration, or
# the spec's port).  One probe is outstanding at a time; wirebench reports the round trips'
# summary (count, loss, min, mean, max, standard deviation, percentiles), not each probe.

# The rtt test's spec schemas this plugin knows (pscheduler-test-rtt: 1 to 4).
RTT_MAX_SPEC_SCHEMA = 4
RTT_PROTOCOLS = ("udp", "tcp", "quic")
# ICMP is not for wirebench (it needs no server); UDP is the nearest (a datagram, lost or not).
RTT_DEFAULT_PROTOCOL = "udp"
# As pScheduler's ping tool: 5 probes, one a second, a second's timeout.
RTT_DEFAULT_COUNT = 5
RTT_DEFAULT_INTERVAL = 1.0
RTT_DEFAULT_TIMEOUT = 1.0
# wirebench's --timeout range (UDP).
RTT_TIMEOUT_RANGE = (0.0001, 60.0)
# TCP and QUIC probes have no timeout (never lost; a stall of 30 s fails the run): for the
# schedule, a round trip is given this long.
RTT_PROBE_BUDGET = 1.0
# Timing, in seconds: start, name lookup, control connection and key; after the last probe;
# the result written.
RTT_SETUP = 2.0
RTT_SLACK = 1.0
RTT_TEARDOWN = 1.0
MAX_UDP_LENGTH_V6 = 65511


def rtt_protocol(spec):
    return spec.get("protocol", RTT_DEFAULT_PROTOCOL)


def _rtt_protocol_check(value):
    if value in RTT_PROTOCOLS:
        return None
    if value in ("icmp", "twamp"):
        return ("wirebench pings a wirebench server over udp, tcp or quic, not %s (the ping "
                "and twping tools do %s)" % (value, value))
    return "must be udp, tcp or quic"


def _rtt_timeout(value):
    try:
        seconds = iso8601_seconds(value)
    except ValueError as ex:
        return str(ex)
    low, high = RTT_TIMEOUT_RANGE
    if not low <= seconds <= high:
        return "must be from 100us (PT0.0001S) to 60s (wirebench's --timeout)"
    return None


def _interval(value):
    try:
        seconds = iso8601_seconds(value)
    except ValueError as ex:
        return str(ex)
    if seconds > MAX_TEST_SECONDS:
        return "must be at most %ds" % MAX_TEST_SECONDS
    return None


# Every field of the rtt spec (schemas 1 to 4): a check of its value that returns None when
# wirebench can do it, else the reason why not.  The option each maps to is in ping_args() and
# README.md.
RTT_SPEC_FIELDS = {
    "schema": _int_in(1, RTT_MAX_SPEC_SCHEMA),
    "dest": _host,
    "source": _host,  # and see rtt_addresses(): honoured only where the kernel picks it
    "source-node": _any_string,
    "count": _int_in(1, None),
    "interval": _interval,
    "length": _int_in(1, MAX_TCP_LENGTH),
    "timeout": _rtt_timeout,
    "deadline": _duration(0.001),
    "ip-version": lambda v: None if v in (4, 6) and is_int(v) else "must be 4 or 6",
    "protocol": _rtt_protocol_check,
    "port": _int_in(1, 65535),
    "hostnames": _boolean,
    "suppress-loopback": _false_only(
        "multicast loopback to suppress (it pings one wirebench server, never a multicast "
        "group)"),
    "ttl": _refused("wirebench cannot set the IP TTL or hop limit (ping's -t)"),
    "ip-tos": _refused("wirebench ping cannot set the IP TOS/DSCP byte (ping's -Q)"),
    "flow-label": _refused("wirebench cannot set the IPv6 flow label (ping's -F)"),
    "fragment": _refused("wirebench does not set a socket's path-MTU discovery (Don't "
                         "Fragment) mode (ping's -M do/want)"),
}


class RttTimeline(object):
    """How long an rtt run may take, in seconds from the scheduled start."""

    def __init__(self, spec):
        protocol = rtt_protocol(spec)
        self.interval = iso8601_seconds(spec["interval"]) if "interval" in spec \
            else RTT_DEFAULT_INTERVAL
        self.timeout = iso8601_seconds(spec["timeout"]) if "timeout" in spec \
            else RTT_DEFAULT_TIMEOUT
        # How long one probe may hold the next one back: a UDP probe its timeout (its answer,
        # or lost); a TCP or QUIC one its round trip, given RTT_PROBE_BUDGET.
        if protocol == "udp":
            per_probe = max(self.interval, self.timeout)  # the next goes at send + interval
            last = self.timeout
        else:
            # TCP: the pause follows the answer; QUIC: the next goes at send + interval, or at
            # the answer when later (this bounds both).
            per_probe = self.interval + RTT_PROBE_BUDGET
            last = RTT_PROBE_BUDGET
        self.deadline = iso8601_seconds(spec["deadline"]) if "deadline" in spec else None
        self.count = None if self.deadline is not None else spec.get("count", RTT_DEFAULT_COUNT)
        if self.deadline is not None:
            probing = self.deadline + last
        else:
            probing = self.count * per_probe
        # When wirebench is stopped if it has not finished.
        self.attempt = RTT_SETUP + probing + RTT_SLACK
        # What the `duration` method says.
        self.total = self.attempt + RTT_TEARDOWN


def rtt_spec_reasons(spec, config=None):
    """Why wirebench cannot run this rtt spec: an empty list when it can.  With a
    configuration, its key file is checked too; a source is checked against the routing
    table (no packet is sent)."""
    if not isinstance(spec, dict):
        return ["The test spec must be a JSON object"]
    reasons = []
    schema = spec.get("schema", 1)
    if not is_int(schema) or not 1 <= schema <= RTT_MAX_SPEC_SCHEMA:
        reasons.append("Spec schema %r is not supported (1 to %d)"
                       % (schema, RTT_MAX_SPEC_SCHEMA))
    if "dest" not in spec:
        reasons.append("The spec has no dest")
    reasons.extend(field_reasons(spec, RTT_SPEC_FIELDS))
    # Combinations are judged only of values that passed their own checks.
    bad = [f for f in spec if f in RTT_SPEC_FIELDS and RTT_SPEC_FIELDS[f](spec[f]) is not None]
    if bad:
        return reasons
    # Combinations (of values that passed their own checks).
    protocol = rtt_protocol(spec)
    if protocol != "udp" and "timeout" in spec:
        reasons.append("timeout: wirebench's --timeout is for UDP probes only; a %s probe is "
                       "never lost (the transport retransmits it) -- leave timeout out, or "
                       "use protocol udp" % protocol)
    if "deadline" in spec and "count" in spec:
        reasons.append("deadline and count cannot both be given: wirebench ping sends a count "
                       "of probes (-c) or probes for a time (-t), not both")
    length = spec.get("length")
    if protocol == "udp" and is_int(length):
        v6 = spec.get("ip-version") == 6 or ip_version_of(spec.get("dest", "")) == 6
        limit = MAX_UDP_LENGTH_V6 if v6 else MAX_UDP_LENGTH
        if length > limit:
            reasons.append("length must be at most %d for UDP over IPv%d (one datagram)"
                           % (limit, 6 if v6 else 4))
    version = spec.get("ip-version")
    dest_version = ip_version_of(spec.get("dest", ""))
    if version and dest_version and version != dest_version:
        reasons.append("dest %s is not an IPv%d address" % (spec["dest"], version))
    if not reasons and RttTimeline(spec).total > MAX_TEST_SECONDS:
        reasons.append("count times interval (and timeout) must come to at most %ds"
                       % MAX_TEST_SECONDS)
    if config is not None and config.get("rtt_psk_file") \
            and not os.access(config["rtt_psk_file"], os.R_OK):
        reasons.append("rtt_psk_file %s (wirebench.conf) cannot be read"
                       % clean_text(config["rtt_psk_file"], 256))
    if not reasons and "source" in spec:
        try:
            rtt_addresses(spec)
        except ValueError as ex:
            reasons.append("source: %s" % ex)
    return reasons


def route_source(dest_ip):
    """The address this host sends from towards dest_ip (a UDP socket connected, which sends
    nothing); raises OSError when there is no route."""
    family = socket.AF_INET6 if ip_version_of(dest_ip) == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.connect((dest_ip, 9))
        return sock.getsockname()[0]


def _same_address(a, b):
    try:
        return ipaddress.ip_address(a.split("%", 1)[0]) == ipaddress.ip_address(b.split("%", 1)[0])
    except ValueError:
        return False


def rtt_addresses(spec):
    """(source, dest) for wirebench ping.  Without a source: (None, the spec's dest).  With
    one: wirebench ping cannot bind an address, so the source is honoured only where it is
    the address the kernel sends from towards the destination anyway (one family: the spec's
    ip-version, else IPv6 where both have it, else IPv4); then the destination goes to
    wirebench as that family's address.  Raises ValueError with the reason."""
    dest = spec["dest"]
    source = spec.get("source")
    if source is None:
        return None, dest
    mine = resolve(source)
    theirs = resolve(dest)
    version = spec.get("ip-version")
    tried = []
    for v in ([version] if version else [6, 4]):
        if not (mine[v] and theirs[v]):
            continue
        dest_ip = theirs[v][0]
        try:
            kernel = route_source(dest_ip)
        except OSError as ex:
            tried.append("no route to %s (%s)" % (dest_ip, ex.strerror or ex))
            continue
        if any(_same_address(kernel, m) for m in mine[v]):
            return kernel, dest_ip
        tried.append("towards %s this host sends from %s" % (dest_ip, kernel))
    if not tried:
        raise ValueError("%s and %s have no address family in common%s"
                         % (source, dest, " (IPv%d)" % version if version else ""))
    raise ValueError("wirebench ping cannot bind a source address, and %s is not the one the "
                     "kernel picks: %s (leave source out, or name the pScheduler host with "
                     "source-node)" % (source, "; ".join(tried)))


def _us(seconds):
    return "%dus" % int(round(seconds * 1000000))


def ping_args(cmd, spec, timeline, dest, port, psk_path=None):
    """`wirebench ping` for an rtt spec: one JSON document (-J), nothing stored.  Every value
    is passed as --option=VALUE, so that none can be taken for an option; the server is given
    with --server (never absent: without it wirebench would ping a server of its own)."""
    protocol = rtt_protocol(spec)
    args = [cmd, "ping", "--server=" + host_port(dest, port), "--proto=" + protocol,
            "--json", "--no-store"]
    if timeline.deadline is not None:
        args.append("--time=" + _us(timeline.deadline))
    else:
        args.append("--count=%d" % timeline.count)
    if timeline.interval > 0:
        args.append("--gap=" + _us(timeline.interval))
    if protocol == "udp":
        args.append("--timeout=" + _us(timeline.timeout))
        args.append("--retries=0")
    if "length" in spec:
        args.append("--msg-size=%d" % spec["length"])
    if spec.get("ip-version") == 4:
        args.append("--ipv4")
    elif spec.get("ip-version") == 6:
        args.append("--ipv6")
    if psk_path:
        args.append("--psk=" + psk_path)
    return args


def ns_as_iso8601(ns):
    """Nanoseconds as an ISO 8601 duration, to the nanosecond: PT0.00001144S."""
    ns = int(round(ns))
    seconds, fraction = divmod(ns, 1000000000)
    if fraction == 0:
        return "PT%dS" % seconds
    return ("PT%d.%09d" % (seconds, fraction)).rstrip("0") + "S"


def convert_rtt(doc, protocol):
    """pScheduler's rtt result from wirebench ping's -J document: the summary (sent, received,
    lost, loss, duplicates, min, max, mean, stddev) and an empty roundtrips list (wirebench
    does not report each probe).  Raises BadOutput."""
    if not isinstance(doc, dict):
        raise BadOutput("the document is not a JSON object")
    if doc.get("command") != "ping":
        raise BadOutput("the document is not wirebench ping's")
    results = doc.get("results")
    if not isinstance(results, list) or len(results) != 1 or not isinstance(results[0], dict):
        raise BadOutput("the document does not hold exactly one result")
    r = results[0]
    if r.get("protocol") != protocol:
        raise BadOutput("the result is for %r, not %r" % (r.get("protocol"), protocol))
    sent = _count(r, "sent", "the result", required=True)
    answered = _count(r, "answered", "the result", required=True)
    lost = _count(r, "lost", "the result", required=True)
    duplicates = _count(r, "duplicates", "the result") or 0
    if answered + lost != sent:
        raise BadOutput("answered (%d) and lost (%d) do not add up to sent (%d)"
                        % (answered, lost, sent))
    if sent == 0:
        raise BadOutput("no probe was sent")
    result = {
        "schema": 1,
        "succeeded": True,
        "roundtrips": [],
        "sent": sent,
        "received": answered,
        "lost": lost,
        "loss": lost / float(sent),
        "duplicates": duplicates,
    }
    response = r.get("response")
    if answered > 0:
        if not isinstance(response, dict):
            raise BadOutput("the result has answers but no response figures")
        samples = _count(response, "samples", "response", required=True)
        if samples != answered:
            raise BadOutput("response.samples (%d) is not answered (%d)" % (samples, answered))
        figures = {}
        for key in ("min", "mean", "max", "stddev"):
            figures[key] = _number(response, key + "_ns", "response", required=True)
        if not figures["min"] <= figures["mean"] <= figures["max"]:
            raise BadOutput("response: not min <= mean <= max")
        for key, ns in figures.items():
            result[key] = ns_as_iso8601(ns)
    return result


# Where the document starts in an rtt result's diags (.ci/pscheduler-check reads it back).
PING_DOC_MARKER = "wirebench ping -J document:"


# =============================================================================================
# latency: `wirebench ping --proto=udp --per-probe` against a standing wirebench server
#
# pScheduler's latency test has one participant, the sender (source-node, else source), as
# owping's: the destination runs a wirebench server (port: the spec's ctrl-port, else rtt_port
# of the configuration, 5310).  The server stamps every probe's arrival; the one-way delays
# come with the bound of the two hosts' clock offset, which goes into max-clock-error (ms).
# packets-lost counts probes whose round trip failed (the probe, or its answer, was lost):
# wirebench cannot tell one direction's loss from the other's.

# The latency test's spec schemas this plugin knows (pscheduler-test-latency: 1 to 4).
LATENCY_MAX_SPEC_SCHEMA = 4
# As owping's defaults: 100 packets, 0.1 s apart, 2 s to arrive (owping -L), histogram bins of
# a millisecond.
LATENCY_DEFAULT_COUNT = 100
LATENCY_DEFAULT_INTERVAL = 0.1
LATENCY_DEFAULT_TIMEOUT = 2.0
LATENCY_DEFAULT_BUCKET = 0.001
# The server's stamps take the first 16 bytes of every probe; padding comes after them.
STAMP_BYTES = 16


def _positive_number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return "must be a number above 0"
    return None


def _bucket_width(value):
    if _positive_number(value) is not None or not value < 1:
        return "must be a number above 0 and below 1 (seconds)"
    return None


def _latency_protocol(value):
    if value == "udp":
        return None
    return ("wirebench measures latency with its own stamped UDP probes to a wirebench server, "
            "not %s (owping and twping do OWAMP and TWAMP)" % clean_text(repr(value), 32))


LATENCY_SPEC_FIELDS = {
    "schema": _int_in(1, LATENCY_MAX_SPEC_SCHEMA),
    "dest": _host,
    "dest-node": _any_string,
    "source": _host,  # and see rtt_addresses(): honoured only where the kernel picks it
    "source-node": _any_string,
    "protocol": _latency_protocol,
    "packet-count": _int_in(1, None),
    "packet-interval": _positive_number,
    "packet-timeout": _int_in(0, 60),
    "packet-padding": _int_in(0, MAX_UDP_LENGTH - STAMP_BYTES),
    "ctrl-port": _int_in(1, 65535),
    "ip-version": lambda v: None if v in (4, 6) and is_int(v) else "must be 4 or 6",
    "bucket-width": _bucket_width,
    "reverse": _boolean,
    "output-raw": _false_only(
        "raw packets (each packet's IP TTL on arrival, which wirebench does not read)"),
    "flip": _false_only(
        "flipped tests (the source runs wirebench ping; the destination runs a wirebench "
        "server)"),
    "traverse-nat": _false_only("NAT traversal"),
    "data-ports": _refused("wirebench's probes go to the server's one port (ctrl-port)"),
    "ip-tos": _refused("wirebench ping cannot set the IP TOS/DSCP byte"),
}


def latency_as_rtt(spec):
    """The rtt spec whose timing a latency spec has (RttTimeline, rtt_addresses)."""
    rtt = {"dest": spec.get("dest"), "protocol": "udp",
           "count": spec.get("packet-count", LATENCY_DEFAULT_COUNT),
           "interval": ns_as_iso8601(
               spec.get("packet-interval", LATENCY_DEFAULT_INTERVAL) * 1e9),
           "timeout": ns_as_iso8601((spec.get("packet-timeout") or LATENCY_DEFAULT_TIMEOUT)
                                    * 1e9)}
    for key in ("source", "ip-version"):
        if key in spec:
            rtt[key] = spec[key]
    return rtt


def latency_spec_reasons(spec, config=None):
    """Why wirebench cannot run this latency spec: an empty list when it can."""
    if not isinstance(spec, dict):
        return ["The test spec must be a JSON object"]
    reasons = []
    if "dest" not in spec:
        reasons.append("The spec has no dest")
    reasons.extend(field_reasons(spec, LATENCY_SPEC_FIELDS))
    if reasons:
        return reasons
    return rtt_spec_reasons(latency_as_rtt(spec), config)


def latency_args(cmd, spec, timeline, dest, port, psk_path=None):
    """`wirebench ping --proto=udp --per-probe` for a latency spec."""
    args = ping_args(cmd, latency_as_rtt(spec), timeline, dest, port, psk_path)
    args.append("--msg-size=%d" % (STAMP_BYTES + spec.get("packet-padding", 0)))
    args.append("--per-probe")
    return args


def histogram_key(delay_ns, bucket):
    """pScheduler's histogram-latency key: the delay in seconds over the bucket width, to two
    decimal places."""
    return "%.2f" % (delay_ns / 1e9 / bucket)


def convert_latency(doc, spec):
    """pScheduler's latency result from wirebench ping's -J document (with --per-probe): the
    packet counts, max-clock-error (the bound of the clocks' offset, ms) and histogram-latency
    of the direction asked for (source to dest; dest to source with reverse).  Raises
    BadOutput."""
    result = convert_rtt(doc, "udp")
    r = doc["results"][0]
    one_way = r.get("one_way")
    if not isinstance(one_way, dict):
        raise BadOutput("the result has no one-way delays (a wirebench server too old to "
                        "stamp its answers?)")
    clock = one_way.get("clock")
    if not isinstance(clock, dict):
        raise BadOutput("no one-way delay could be bounded: %s"
                        % clean_text(str(one_way.get("unavailable", "no reason given")), 200))
    bound_ns = _count(clock, "bound_ns", "one_way.clock", required=True)
    probes = one_way.get("probes")
    if not isinstance(probes, list):
        raise BadOutput("one_way has no probes (--per-probe)")
    key = "down_ns" if spec.get("reverse") else "up_ns"
    bucket = spec.get("bucket-width", LATENCY_DEFAULT_BUCKET)
    histogram = {}
    for p in probes:
        if not isinstance(p, dict):
            raise BadOutput("a probe is not an object")
        delay = p.get(key)
        if delay is None:
            continue  # outside the bound: counted by wirebench, never a figure
        if not is_int(delay):
            raise BadOutput("a probe's %s is not an integer" % key)
        bin_key = histogram_key(delay, bucket)
        histogram[bin_key] = histogram.get(bin_key, 0) + 1
    return {
        "schema": 1,
        "succeeded": True,
        "packets-sent": result["sent"],
        "packets-received": result["received"],
        "packets-lost": result["lost"],
        "packets-duplicated": result["duplicates"],
        # One probe outstanding at a time: none can overtake another.
        "packets-reordered": 0,
        "max-clock-error": bound_ns / 1e6,
        "histogram-latency": histogram,
    }
