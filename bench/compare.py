#!/usr/bin/env python3
"""Side-by-side benchmark: wirebench against iperf3, nuttcp, sockperf, xfr and quinn-perf on loopback.

Runs every workload for wirebench and its reference tool *alternately* (A B A B ...), so slow
drifts of a noisy VM hit both equally, then prints medians with min-max and the ratio
wirebench / reference, with each pair's own ratio and what the pairs say together: ahead or
behind when every pair agrees by more than 1 %, within noise when they do not; the rows behind
in every pair are listed at the end. CPU seconds per GiB are measured for client and server
processes from getrusage (client) and /proc/PID/stat (server). Results are also written as JSON.

It installs nothing: missing reference tools are reported and their workloads skipped.
QUIC's reference is quinn's own perf tool, built from a quinn source checkout named by
--quinn-src PATH or $QUINN_SRC (`git clone https://github.com/quinn-rs/quinn`; it is built there
with `cargo build --release -p perf` when target/release/quinn-perf is missing, never copied here).
QUIC stop-and-wait is also set against bare quinn's own floor, our example
crates/wirebench/examples/quic_floor.rs (`cargo build --release --example quic_floor`).
Usage: bench/compare.py [--pairs 5] [--only tcp128k,udp1024,...] [--quinn-src PATH] [--out FILE]
                        [--seconds 3] [--iperf3 PATH] [--sockperf PATH] [--pin same|cross]
--pin same puts every server and client on CPU 1, --pin cross servers on CPU 0 and clients on
CPU 1 (taskset): on a 2-CPU machine round trips then measure the path's own cost (same) or its
cost with a wake-up across CPUs (cross) steadily, instead of whichever the scheduler picks.
quic_floor plays both ends in one process, so it sits on the clients' CPU, and --pin cross
skips it; --pin same skips the *_busy rows (busy-poll on one CPU measures the time slice).
iperf3 always runs timed (-t): 3.17+ reports a -n run over whole seconds; tcp128k runs wirebench
for an exact byte count sized to last about as long (5 GiB per second of --seconds: a loopback
connection's first ~0.13 s runs slow for either tool). The _P1/_P4/_P8 rows run
both tools with -t and -P N. UDP rows are set against iperf3 twice, at its default and with
--gsro (GSO/GRO, iperf3 3.21+, its best UDP setting; skipped with an older iperf3); udp1472_R
is the same with -R (the server sends, the client receives). first_run is
each tool at its defaults, nothing but a server and -t. The first line printed gives the
machine's CPU count.
The QUIC rows alone: QUINN_SRC=~/src/quinn bench/compare.py --only quic
A name in --only also selects the rows it prefixes (udp1472_P1 runs udp1472_P1_paced too);
end it with $ for that row alone: --only 'udp1472_P1$,tcp128k_P1'.
Traffic goes to 127.0.0.1 only.
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HOST = "127.0.0.1"
GiB = 1 << 30
# --pin: (the servers' CPU, the clients' CPU) for taskset, or None to let the scheduler place them.
PIN = None


def pinned(cmd, side):
    """`cmd` under taskset on `side`'s CPU (0: servers, 1: clients) when --pin asks for it."""
    return ["taskset", "-c", PIN[side], *cmd] if PIN else cmd


def placement_skip(name, ref_name, pin):
    """Why `pin` cannot measure the pair (`name` against `ref_name`), or None when it can."""
    if pin == "same" and name.endswith("_busy"):
        # Each end spins through its time slice before the other may answer: the figure is
        # the scheduler's slice (milliseconds a round trip), and a run takes many minutes.
        return "busy-poll with both ends on one CPU measures the scheduler's time slice; run it unpinned or --pin cross"
    if pin == "cross" and ref_name.startswith("quic_floor"):
        # quic_floor is one process holding both ends, so taskset puts them on one CPU.
        return "quic_floor holds both ends in one process, which --pin cross puts on one CPU; run it unpinned or --pin same"
    return None


CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def proc_cpu_seconds(pid):
    """User + system CPU seconds of a running process we started."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except OSError:
        return 0.0


def run_client(cmd, timeout=600):
    """Runs a client to completion; returns (stdout, client CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = pinned(cmd, 1)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.stdout, cpu


class Servers:
    """Reference and wirebench servers, started by us and ended by PID."""

    def __init__(self, wirebench):
        self.procs = {}
        self.ports = {}
        self.wirebench = wirebench

    def start(self, name, cmd, ready_probe=None):
        proc = subprocess.Popen(pinned(cmd, 0), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs[name] = proc
        deadline = time.time() + 10
        while ready_probe and time.time() < deadline and not ready_probe():
            time.sleep(0.05)
        return proc

    def pid(self, name):
        return self.procs[name].pid

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()


def udp_bound(port):
    """True once some socket is bound to UDP `port` on 127.0.0.1 (quinn-perf has no TCP port to probe)."""
    def probe():
        want = f"0100007F:{port:04X}"
        try:
            with open("/proc/net/udp") as f:
                return any(line.split()[1] == want for line in f.readlines()[1:])
        except (OSError, IndexError):
            return False
    return probe


def tcp_ready(port):
    def probe():
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return True
        except OSError:
            return False
    return probe


# --- one measurement per tool -------------------------------------------------------------

def wirebench_run(servers, proto, mode, size, total, extra=(), seconds=None, parallel=1):
    """One wirebench run: `total` bytes (-n, exact), or for `seconds` (-t) when given; `parallel` flows."""
    port = servers.ports["wirebench"]
    pid = servers.pid("wirebench")
    srv0 = proc_cpu_seconds(pid)
    amount = ["-t", str(seconds)] if seconds else ["-n", str(total)]
    flows = ["-P", str(parallel)] if parallel > 1 else []
    length = ["-l", str(size)] if size is not None else []  # None: wirebench's default
    out, cpu = run_client([servers.wirebench, "run", "--server", f"{HOST}:{port}", "--proto", proto,
                           "--mode", mode, *length, *amount, *flows, "--json", "--no-store", *extra])
    srv_cpu = proc_cpu_seconds(pid) - srv0
    run = json.loads(out)["runs"][0]
    c, s = run["client"], run["server"]
    res = {"client_cpu_s": cpu, "server_cpu_s": srv_cpu, "gib": c["bytes"] / GiB}
    if mode == "saw":
        res["p50_us"] = c["rtt"]["p50_ns"] / 1000
        res["p99_us"] = c["rtt"]["p99_ns"] / 1000
    else:
        # The run's headline: what the receiver got over the run's transfer time.
        res["gbit_s"] = (run["headline"]["goodput_bps"] or 0.0) / 1e9
        if proto == "udp":
            res["datagrams_per_s"] = s["messages"] / s["seconds"] if s["seconds"] else 0
            delivery = run["headline"]["delivery"]
            res["loss_pct"] = delivery["lost_pct"]
            # Where the lost datagrams went (receiving host, sending host, path), in datagrams.
            res["lost"] = delivery["lost"]
            if "loss_split" in delivery:
                res["loss_split"] = delivery["loss_split"]
            if extra and "--rate" in extra:
                res["rate_per_flow"] = extra[list(extra).index("--rate") + 1]
    res["data_path"] = {"client": c["data_path"], "server": s["data_path"]}
    if proto == "quic":
        # The sender's path MTU (largest UDP payload) at the end, packets it sent per GiB.
        sender = s if "-R" in extra else c
        t = (sender.get("transport") or {})
        res["path_mtu"] = t.get("path_mtu")
        res["packets_per_gib"] = t.get("packets_sent", 0) / max(c["bytes"] / GiB, 1e-9)
        res["send_window"] = t.get("send_window_bytes")  # streaming senders only
    return res


def paced_max(unpaced, trial, seconds, max_loss_pct=0.1):
    """The highest total rate (Gbit/s) that loses at most `max_loss_pct`, then a measurement
    there: start at what `unpaced()` delivered, step down 15% while a 1 s `trial(rate, 1)`
    loses more, then `trial(rate, seconds)`. Its figures, with `rate_found_gbit_s` and
    `trials` saying how."""
    rate = max(unpaced()["gbit_s"], 0.1)
    trials = 1
    for _ in range(8):
        t = trial(rate, 1)
        trials += 1
        if t["loss_pct"] <= max_loss_pct:
            break
        rate *= 0.85
    res = trial(rate, seconds)
    res["rate_found_gbit_s"] = rate
    res["trials"] = trials
    return res


def wirebench_paced_max(servers, size, parallel, seconds):
    """-P N UDP paced at the highest total rate that loses at most 0.1% (`paced_max`; `run
    --rate max` searches one flow only), each flow its share."""
    def trial(total_gbit, secs):
        per_flow = f"{total_gbit * 1e3 / parallel:.0f}Mbit"
        return wirebench_run(servers, "udp", "stream", size, 0, ["--rate", per_flow],
                             seconds=secs, parallel=parallel)
    unpaced = lambda: wirebench_run(servers, "udp", "stream", size, 0, seconds=1, parallel=parallel)
    return paced_max(unpaced, trial, seconds)


def iperf3_paced_max(servers, size, parallel, seconds, gsro):
    """iperf3 paced (-b per stream) the same way (`paced_max`): the like-for-like reference of
    a paced row, both tools at the same loss bound."""
    def trial(total_gbit, secs):
        per_stream = f"{total_gbit * 1e3 / parallel:.0f}M"
        return iperf3_run(servers, True, size, secs, parallel, gsro=gsro, rate=per_stream)
    unpaced = lambda: iperf3_run(servers, True, size, 1, parallel, gsro=gsro)
    return paced_max(unpaced, trial, seconds)


def quinn_perf_binary(src):
    """quinn's perf tool from the checkout `src`, built there (its own target dir) if missing."""
    binary = os.path.join(src, "target", "release", "quinn-perf")
    if not os.access(binary, os.X_OK):
        if not os.path.isfile(os.path.join(src, "perf", "Cargo.toml")):
            return None
        print(f"building quinn-perf in {src} (cargo build --release -p perf) ...", file=sys.stderr, flush=True)
        subprocess.run(["cargo", "build", "--release", "-p", "perf"], cwd=src, check=True)
    return binary


def quinn_proto_version(src):
    """The quinn-proto version of the checkout `src` and its commit, as "quinn-proto 0.12.0
    (a1931ab)": quinn's main branch carries per-packet work that no release has yet (its sent
    packets in a ring buffer, not a BTreeMap), so quinn-perf built from main is ahead of any
    tool linking the released quinn, ours included; the header says which one was measured."""
    version = "?"
    try:
        with open(os.path.join(src, "quinn-proto", "Cargo.toml")) as f:
            m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
            version = m.group(1) if m else "?"
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return f"quinn-proto {version}" + (f" ({commit})" if commit else "")


def linked_quinn_proto():
    """The quinn-proto version wirebench links, from the Cargo.lock beside this script's
    checkout ("quinn-proto 0.11.19"), or "" when there is none."""
    lock = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "Cargo.lock")
    try:
        with open(lock) as f:
            m = re.search(r'name = "quinn-proto"\nversion = "([^"]+)"', f.read())
    except OSError:
        return ""
    return f"quinn-proto {m.group(1)}" if m else ""


# quinn 0.11 and main put up to 10 packets in one GSO send, which the kernel refuses above
# 65507 bytes; quinn-perf cannot turn GSO off, so it runs at most at this MTU.
QUINN_PERF_MAX_MTU = 6550


def quinn_perf_mtu(mtu):
    """The MTU quinn-perf runs at for a wanted `mtu` (None: its own default, 1452)."""
    return 1452 if mtu is None else min(mtu, QUINN_PERF_MAX_MTU)


def quinn_perf_mtu_args(mtu):
    """quinn-perf at a fixed MTU (it has no discovery bound flag): start at `mtu`, accept up to it."""
    if mtu is None:
        return []  # its defaults: initial 1200, discovery up to 1452
    mtu = quinn_perf_mtu(mtu)
    return ["--initial-mtu", str(mtu), "--max-udp-payload-size", str(max(mtu, 1472))]


def quinn_perf_run(servers, upload, download, mtu=None, seconds=None, attempt=0):
    """quinn-perf client: repeated requests on one bidirectional stream for `seconds`; the
    figure is the median per-request throughput it prints (upload: until the server has
    acknowledged every byte; download: request to last byte), CPU per GiB over all bytes moved."""
    name = "quinn-perf" if mtu is None else f"quinn-perf-{mtu}"
    if name not in servers.procs:
        # A server at this MTU too: each end sends at its own initial MTU (downloads: the server's).
        p = servers.ports[name] = free_port()
        servers.start(name, [servers.quinn_perf, "server", "--listen", f"{HOST}:{p}",
                             *quinn_perf_mtu_args(mtu)], udp_bound(p))
    port = servers.ports[name]
    pid = servers.pid(name)
    size = upload or download
    # Long enough for a few whole requests even on a loaded machine; it prints per second.
    seconds = seconds or servers.quinn_seconds
    jpath = f"/tmp/quinn-perf-{os.getpid()}.json"
    srv0 = proc_cpu_seconds(pid)
    out, cpu = run_client([servers.quinn_perf, "client", f"{HOST}:{port}", "--bi-requests", "1",
                           "--upload-size", str(upload), "--download-size", str(download),
                           "--duration", str(seconds), "--json", jpath, *quinn_perf_mtu_args(mtu)])
    srv_cpu = proc_cpu_seconds(pid) - srv0
    rows = [line for line in out.splitlines() if line.strip().startswith("P50")]
    try:
        with open(jpath) as f:
            moved = sum(i["sum"]["bytes"] for i in json.load(f)["intervals"])
        os.unlink(jpath)
    except (OSError, ValueError, KeyError) as e:
        # quinn-perf exits 0 without writing its JSON when its connection fails early (seen
        # once in a long run); the run counts for nothing, so it is run again.
        if attempt >= 2:
            raise RuntimeError(f"quinn-perf wrote no usable JSON three times ({e}): {out[-400:]}")
        return quinn_perf_run(servers, upload, download, mtu, seconds, attempt + 1)
    col = -2 if upload else -1  # Upload / Download Throughput (Mb/s, 10^6 bit/s)
    mbit = float(re.split(r"[│|]", rows[-1])[col].split()[0]) if rows else 0.0
    if mbit == 0.0:
        if seconds >= 120:
            raise RuntimeError(f"quinn-perf finished no {size}-byte request in {seconds} s")
        return quinn_perf_run(servers, upload, download, mtu, seconds * 2)
    return {"gbit_s": mbit / 1000, "client_cpu_s": cpu, "server_cpu_s": srv_cpu, "gib": moved / GiB}


def wirebench_ping(servers, proto, size, count):
    """`wirebench ping`: one flow, one probe outstanding, SIZE-byte probes and answers."""
    port = servers.ports["wirebench"]
    out, cpu = run_client([servers.wirebench, "ping", "--server", f"{HOST}:{port}", "--proto", proto,
                           "-l", str(size), "--count", str(count), "--json", "--no-store"])
    r = json.loads(out)["results"][0]["response"]
    return {"p50_us": r["p50_ns"] / 1000, "p99_us": r["p99_ns"] / 1000, "client_cpu_s": cpu}


def xfr_run(servers, mode, size, total, seconds=3):
    """xfr client: QUIC for `total` bytes, or unpaced UDP of `size`-byte datagrams for `seconds`."""
    port = servers.ports["xfr"]
    pid = servers.pid("xfr")
    srv0 = proc_cpu_seconds(pid)
    cmd = ["xfr", f"{HOST}:{port}", "--json", "--no-tui", "-q"]
    if mode == "quic":
        cmd += ["-Q", "-n", str(total)]
    else:
        cmd += ["-u", "-l", str(size), "-b", "0", "-t", str(seconds)]
    out, cpu = run_client(cmd)
    srv_cpu = proc_cpu_seconds(pid) - srv0
    d = json.loads(out)
    secs = d["duration_ms"] / 1000
    res = {"client_cpu_s": cpu, "server_cpu_s": srv_cpu, "gib": d["bytes_total"] / GiB}
    if mode == "quic":
        res["gbit_s"] = d["throughput_mbps"] / 1000
    else:
        u = d["udp_stats"]
        delivered = u["packets_received"]
        res["datagrams_per_s"] = delivered / secs
        res["loss_pct"] = u["lost_percent"]
        res["gbit_s"] = delivered * size * 8 / secs / 1e9
    return res


def iperf3_run(servers, udp, size, seconds, parallel=1, gsro=False, rate="0", reverse=False):
    """iperf3 for `seconds` (-t), never -n: iperf3 3.17+ reports a -n run over whole seconds
    (1 GiB at 128 KiB reads 8.58 Gbit/s at any speed, -P 8 reads 8 x 8.58), so only a timed
    run gives its true rate. UDP is unpaced (-b 0), as ours; -P streams are threads (3.16+).
    `gsro`: iperf3 3.21's --gsro (UDP GSO on the sender, GRO on the receiver), its best UDP
    setting; `size` None: iperf3's own default length (128 KiB TCP, 1460 B UDP); `rate` its
    -b per stream (0: unpaced); `reverse`: -R, the server sends."""
    port = servers.ports["iperf3"]
    pid = servers.pid("iperf3")
    srv0 = proc_cpu_seconds(pid)
    cmd = [servers.iperf3, "-c", HOST, "-p", str(port), "-t", str(seconds), "-J"]
    if size is not None:
        cmd += ["-l", str(size)]
    if parallel > 1:
        cmd += ["-P", str(parallel)]
    if udp:
        cmd += ["-u", "-b", rate]
    if gsro:
        cmd.append("--gsro")
    if reverse:
        cmd.append("-R")
    out, cpu = run_client(cmd)
    srv_cpu = proc_cpu_seconds(pid) - srv0
    end = json.loads(out)["end"]
    res = {"client_cpu_s": cpu, "server_cpu_s": srv_cpu}
    if udp:
        s = end["sum"]
        size = size or 1460
        delivered = s["packets"] - s["lost_packets"]
        res["datagrams_per_s"] = delivered / s["seconds"] if s["seconds"] else 0
        res["loss_pct"] = s["lost_percent"]
        res["gbit_s"] = delivered * size * 8 / s["seconds"] / 1e9
        res["gib"] = delivered * size / GiB
    else:
        res["gbit_s"] = end["sum_received"]["bits_per_second"] / 1e9
        res["gib"] = end["sum_received"]["bytes"] / GiB
    return res


def iperf3_interop_client(servers, tool, mode, seconds):
    """One iperf3 test against `iperf3 -s` by `tool` ("wirebench": `run --iperf3`; "iperf3": the
    real client), `mode` its extra flags: what the iperf3 server measured (its receiver's
    bit/s, with -R its sender's), as each client reports it."""
    port = servers.ports["iperf3"]
    if tool == "wirebench":
        cmd = [servers.wirebench, "run", "--iperf3", f"{HOST}:{port}", "-t", str(seconds), "--json",
               "--no-store", *mode]
        out, cpu = run_client(cmd)
        theirs = json.loads(out)["iperf3_server"]
        return {"gbit_s": theirs["throughput_bps"] / 1e9, "client_cpu_s": cpu, "gib": theirs["bytes"] / GiB}
    out, cpu = run_client([servers.iperf3, "-c", HOST, "-p", str(port), "-t", str(seconds), "-J", *mode])
    end = json.loads(out)["end"]
    theirs = end["sum_sent"] if "-R" in mode else end["sum_received"]
    return {"gbit_s": theirs["bits_per_second"] / 1e9, "client_cpu_s": cpu, "gib": theirs["bytes"] / GiB}


def iperf3_interop_server(servers, server, mode, seconds):
    """iperf3's real client against `server` ("wirebench": `wirebench server --iperf3`;
    "iperf3": `iperf3 -s`), `mode` its extra flags: what arrived, both directions summed."""
    port = servers.ports["wirebench_iperf3" if server == "wirebench" else "iperf3"]
    pid = servers.pid("wirebench" if server == "wirebench" else "iperf3")
    srv0 = proc_cpu_seconds(pid)
    out, cpu = run_client([servers.iperf3, "-c", HOST, "-p", str(port), "-t", str(seconds), "-J", *mode])
    end = json.loads(out)["end"]
    bps = end["sum_received"]["bits_per_second"] + end.get("sum_received_bidir_reverse", {}).get("bits_per_second", 0)
    return {"gbit_s": bps / 1e9, "client_cpu_s": cpu, "server_cpu_s": proc_cpu_seconds(pid) - srv0,
            "gib": end["sum_received"]["bytes"] / GiB}


def nuttcp_run(servers, size, total):
    port = servers.ports["nuttcp"]
    pid = servers.pid("nuttcp")
    srv0 = proc_cpu_seconds(pid)
    out, cpu = run_client(["nuttcp", f"-P{port}", f"-l{size}", f"-n{total // size}", "-fparse", HOST])
    srv_cpu = proc_cpu_seconds(pid) - srv0
    rate = float(re.search(r"rate_Mbps=([\d.]+)", out).group(1))
    return {"gbit_s": rate / 1000, "client_cpu_s": cpu, "server_cpu_s": srv_cpu, "gib": total / GiB}


def quic_floor_run(servers, count, variant):
    """Bare quinn's stop-and-wait (examples/quic_floor.rs, both ends in its own process): `count`
    round trips of 1 KiB answered by one byte; `variant` bare (quinn's socket and settings) or
    tuned (wirebench's socket and transport settings)."""
    out, cpu = run_client([servers.quic_floor, str(count), "1024", variant])
    res = json.loads(out.strip().splitlines()[-1])
    # One process plays both ends, so its CPU is all on the client's side.
    return {"client_cpu_s": cpu, "server_cpu_s": 0.0, "gib": count * 1024 / GiB,
            "p50_us": res["p50_us"], "p99_us": res["p99_us"]}


def sockperf_run(servers, tcp, size, seconds=3):
    port = servers.ports["sockperf_tcp" if tcp else "sockperf_udp"]
    cmd = [servers.sockperf, "ping-pong", "-i", HOST, "-p", str(port), "-m", str(size), "-t", str(seconds), "--full-rtt"]
    if tcp:
        cmd.append("--tcp")
    out, cpu = run_client(cmd)
    pct = {m.group(1): float(m.group(2)) for m in re.finditer(r"percentile (\d+\.\d+) =\s+([\d.]+)", out)}
    return {"p50_us": pct["50.000"], "p99_us": pct["99.000"], "client_cpu_s": cpu}


# --- workloads ----------------------------------------------------------------------------

# The tcp128k row's byte count per second of --seconds: about what one 128 KiB stream moves on
# a 2-vCPU VM (5 GiB/s = 43 Gbit/s), so its -n run lasts about as long as iperf3's -t.
TCP128K_BYTES_PER_SECOND = 5 * GiB


def workloads(total_tcp, total_udp, saw_msgs, seconds):
    """(name, metric, higher_is_better, wirebench thunk, [(reference name, thunk)])"""
    rows = [
        # A user's first run: each tool with nothing but a server and a time, at its defaults
        # (wirebench: TCP streaming, 128 KiB messages since issue 42, 1 KiB before; iperf3: TCP
        # in 128 KiB writes).
        ("first_run", "gbit_s", True,
         lambda s: wirebench_run(s, "tcp", "stream", None, 0, seconds=seconds),
         [("iperf3", lambda s: iperf3_run(s, False, None, seconds))]),
        # An exact byte count (-n) against iperf3's -t: sized to last about as long, since every
        # loopback TCP connection starts slow for its first ~0.13 s (either tool, any congestion
        # control, fixed buffers too: 13-29 Gbit/s, then 35-55 on 2 vCPUs). A 1 GiB run (0.2 s,
        # until 2026-11-30) was mostly that start against iperf3's 3 s: 0.86 where 8 GiB read
        # 0.97 (docs/dev/benchmarking.md, "Issue 42, session 17").
        ("tcp128k", "gbit_s", True,
         lambda s: wirebench_run(s, "tcp", "stream", 131072, TCP128K_BYTES_PER_SECOND * seconds),
         [("iperf3", lambda s: iperf3_run(s, False, 131072, seconds))]),
        ("tcp1k", "gbit_s", True, lambda s: wirebench_run(s, "tcp", "stream", 1024, total_tcp),
         [("nuttcp", lambda s: nuttcp_run(s, 1024, total_tcp)),
          ("iperf3", lambda s: iperf3_run(s, False, 1024, seconds))]),
        ("udp1024", "datagrams_per_s", True, lambda s: wirebench_run(s, "udp", "stream", 1024, total_udp),
         [("iperf3", lambda s: iperf3_run(s, True, 1024, seconds))]),
        ("udp1472", "datagrams_per_s", True, lambda s: wirebench_run(s, "udp", "stream", 1472, total_udp),
         [("iperf3", lambda s: iperf3_run(s, True, 1472, seconds)),
          ("iperf3-gsro", lambda s: iperf3_run(s, True, 1472, seconds, gsro=True))]),
        # Paced: the same datagrams at the highest rate that loses at most 0.1 % (found by
        # wirebench_paced_max), to compare delivered datagrams/s at equal or lower loss (the
        # unpaced runs above send so fast that the receiver, on the same two vCPUs, drops
        # some). A fixed rate (4 and 6 Gbit/s until 2026-11-30) capped wirebench below what
        # iperf3 delivered once the machine got faster.
        ("udp1024paced", "datagrams_per_s", True,
         lambda s: wirebench_paced_max(s, 1024, 1, seconds),
         [("iperf3", lambda s: iperf3_run(s, True, 1024, seconds)),
          ("iperf3-gsro-paced", lambda s: iperf3_paced_max(s, 1024, 1, seconds, gsro=True))]),
        ("udp1472paced", "datagrams_per_s", True,
         lambda s: wirebench_paced_max(s, 1472, 1, seconds),
         [("iperf3", lambda s: iperf3_run(s, True, 1472, seconds)),
          ("iperf3-gsro-paced", lambda s: iperf3_paced_max(s, 1472, 1, seconds, gsro=True))]),
    ]
    # Parallel flows, both tools timed (-t) with -P N: TCP at 128 KiB and 1 KiB, UDP 1472 B unpaced,
    # and UDP paced at the highest rate its flows carry with at most 0.1% loss (found by
    # wirebench_paced_max; iperf3 unpaced beside it). Issue 28's target: P8 paced >= 3x P1 at <= 1% loss.
    for n in (1, 4, 8):
        rows.append((f"udp1472_P{n}_paced", "gbit_s", True,
                     lambda s, n=n: wirebench_paced_max(s, 1472, n, seconds),
                     [("iperf3", lambda s, n=n: iperf3_run(s, True, 1472, seconds, n)),
                      ("iperf3-gsro", lambda s, n=n: iperf3_run(s, True, 1472, seconds, n, gsro=True)),
                      # Like for like: iperf3 --gsro paced to the same loss bound, found the same way.
                      ("iperf3-gsro-paced",
                       lambda s, n=n: iperf3_paced_max(s, 1472, n, seconds, gsro=True))]))
        rows += [
            (f"tcp128k_P{n}", "gbit_s", True,
             lambda s, n=n: wirebench_run(s, "tcp", "stream", 131072, 0, seconds=seconds, parallel=n),
             [("iperf3", lambda s, n=n: iperf3_run(s, False, 131072, seconds, n))]),
            (f"tcp1k_P{n}", "gbit_s", True,
             lambda s, n=n: wirebench_run(s, "tcp", "stream", 1024, 0, seconds=seconds, parallel=n),
             [("iperf3", lambda s, n=n: iperf3_run(s, False, 1024, seconds, n))]),
            (f"udp1472_P{n}", "gbit_s", True,
             lambda s, n=n: wirebench_run(s, "udp", "stream", 1472, 0, seconds=seconds, parallel=n),
             [("iperf3", lambda s, n=n: iperf3_run(s, True, 1472, seconds, n)),
              ("iperf3-gsro", lambda s, n=n: iperf3_run(s, True, 1472, seconds, n, gsro=True))]),
        ]
    # The server sends (-R): the client's receive against iperf3's, unpaced, one flow.
    rows.append(("udp1472_R", "gbit_s", True,
                 lambda s: wirebench_run(s, "udp", "stream", 1472, 0, ["-R"], seconds=seconds),
                 [("iperf3", lambda s: iperf3_run(s, True, 1472, seconds, reverse=True)),
                  ("iperf3-gsro", lambda s: iperf3_run(s, True, 1472, seconds, gsro=True, reverse=True))]))
    # iperf3's own users (issue 39): `run --iperf3` against `iperf3 -s` beside iperf3's client
    # (the figure the iperf3 server measured), and iperf3's client against `wirebench server
    # --iperf3` beside `iperf3 -s` (what arrived, both directions).
    for name, mode in (("P1", []), ("P4", ["-P", "4"]), ("R", ["-R"])):
        rows.append((f"iperf3_client_{name}", "gbit_s", True,
                     lambda s, mode=mode: iperf3_interop_client(s, "wirebench", mode, seconds),
                     [("iperf3", lambda s, mode=mode: iperf3_interop_client(s, "iperf3", mode, seconds))]))
    for name, mode in (("P1", []), ("P4", ["-P", "4"]), ("bidir", ["-P", "2", "--bidir"]), ("R", ["-R"])):
        rows.append((f"iperf3_server_{name}", "gbit_s", True,
                     lambda s, mode=mode: iperf3_interop_server(s, "wirebench", mode, seconds),
                     [("iperf3", lambda s, mode=mode: iperf3_interop_server(s, "iperf3", mode, seconds))]))
    return rows + [
        ("saw_tcp_1k", "p50_us", False, lambda s: wirebench_run(s, "tcp", "saw", 1024, 1024 * saw_msgs),
         [("sockperf", lambda s: sockperf_run(s, True, 1024))]),
        ("saw_udp_1k", "p50_us", False, lambda s: wirebench_run(s, "udp", "saw", 1024, 1024 * saw_msgs),
         [("sockperf", lambda s: sockperf_run(s, False, 1024))]),
        ("saw_tcp_busy", "p50_us", False,
         lambda s: wirebench_run(s, "tcp", "saw", 1024, 1024 * saw_msgs, ["--busy-poll"]),
         [("sockperf", lambda s: sockperf_run(s, True, 1024))]),
        ("saw_udp_busy", "p50_us", False,
         lambda s: wirebench_run(s, "udp", "saw", 1024, 1024 * saw_msgs, ["--busy-poll"]),
         [("sockperf", lambda s: sockperf_run(s, False, 1024))]),
        # `wirebench ping` (a ping-pong of equal-sized probe and answer, as sockperf's);
        # QUIC has no sockperf peer, so its reference is sockperf over TCP.
        ("ping_tcp_1k", "p50_us", False, lambda s: wirebench_ping(s, "tcp", 1024, saw_msgs),
         [("sockperf", lambda s: sockperf_run(s, True, 1024))]),
        ("ping_udp_1k", "p50_us", False, lambda s: wirebench_ping(s, "udp", 1024, saw_msgs),
         [("sockperf", lambda s: sockperf_run(s, False, 1024))]),
        ("ping_quic_1k", "p50_us", False, lambda s: wirebench_ping(s, "quic", 1024, saw_msgs),
         [("sockperf-tcp", lambda s: sockperf_run(s, True, 1024))]),
        ("quic128k", "gbit_s", True, lambda s: wirebench_run(s, "quic", "stream", 131072, total_tcp),
         [("xfr-quic", lambda s: xfr_run(s, "quic", 0, total_tcp))]),
        ("udp1472xfr", "gbit_s", True, lambda s: wirebench_run(s, "udp", "stream", 1472, total_udp),
         [("xfr-udp", lambda s: xfr_run(s, "udp", 1472, 0))]),
        # QUIC against quinn's perf tool, one stream, TLS on. At quinn-perf's MTU (both discover
        # up to 1452: the fair ratio), then with our discovery bound at 65527 (what loopback
        # carries), quinn-perf started at the MTU ours reached (at most 6550, see above).
        ("quic_up", "gbit_s", True,
         lambda s: wirebench_run(s, "quic", "stream", 131072, total_tcp, ["--quic-mtu", "1452"]),
         [("quinn-perf", lambda s: quinn_perf_run(s, total_tcp, 0))]),
        ("quic_down", "gbit_s", True,
         lambda s: wirebench_run(s, "quic", "stream", 131072, total_tcp, ["-R", "--quic-mtu", "1452"]),
         [("quinn-perf", lambda s: quinn_perf_run(s, 0, total_tcp))]),
        ("quic_up_pmtu", "gbit_s", True,
         lambda s: wirebench_run(s, "quic", "stream", 131072, total_tcp, ["--quic-mtu", "65527"]),
         [("quinn-perf", lambda s: quinn_perf_run(s, total_tcp, 0, s.discovered_mtu))]),
        ("quic_down_pmtu", "gbit_s", True,
         lambda s: wirebench_run(s, "quic", "stream", 131072, total_tcp, ["-R", "--quic-mtu", "65527"]),
         [("quinn-perf", lambda s: quinn_perf_run(s, 0, total_tcp, s.discovered_mtu))]),
        # Small messages: each 1 KiB message its own write, against our own TCP at 1 KiB.
        ("quic_1k", "gbit_s", True, lambda s: wirebench_run(s, "quic", "stream", 1024, total_tcp // 2),
         [("wirebench-tcp", lambda s: wirebench_run(s, "tcp", "stream", 1024, total_tcp // 2))]),
        # The same with loopback's MTU, which our TCP uses too (64 KiB segments).
        ("quic_1k_pmtu", "gbit_s", True,
         lambda s: wirebench_run(s, "quic", "stream", 1024, total_tcp // 2, ["--quic-mtu", "65527"]),
         [("wirebench-tcp", lambda s: wirebench_run(s, "tcp", "stream", 1024, total_tcp // 2))]),
        ("quic_saw_1k", "p50_us", False, lambda s: wirebench_run(s, "quic", "saw", 1024, 1024 * saw_msgs),
         [("wirebench-tcp", lambda s: wirebench_run(s, "tcp", "saw", 1024, 1024 * saw_msgs))]),
        # The same exchange with quinn alone (examples/quic_floor.rs): quinn's own floor, so the
        # row above splits into what is quinn's and what is ours.
        ("quic_saw_floor", "p50_us", False, lambda s: wirebench_run(s, "quic", "saw", 1024, 1024 * saw_msgs),
         [("quic_floor-bare", lambda s: quic_floor_run(s, saw_msgs, "bare")),
          ("quic_floor-tuned", lambda s: quic_floor_run(s, saw_msgs, "tuned"))]),
        ("quic_ping_1k", "p50_us", False, lambda s: wirebench_ping(s, "quic", 1024, saw_msgs),
         [("wirebench-tcp", lambda s: wirebench_ping(s, "tcp", 1024, saw_msgs))]),
    ]


def summarise(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


# A pair's ratio within this of 1.0 is a tie: no timing on a shared VM resolves less.
TIE = 0.01


def paired_verdict(ours, theirs, higher_is_better):
    """Each pair's ratio (ours / theirs, the pair's two runs back to back) and what the pairs
    say together: "ahead" or "behind" when every pair says so by more than TIE, "within
    noise" otherwise (the VM's drift between pairs is then as large as the gap).

    >>> paired_verdict([10, 12, 11], [9, 11, 10], True)
    ([1.111, 1.091, 1.1], 'ahead')
    >>> paired_verdict([48, 52, 47], [50, 50, 49], True)
    ([0.96, 1.04, 0.959], 'within noise')
    >>> paired_verdict([12.0, 12.2], [11.5, 11.9], False)
    ([1.043, 1.025], 'behind')
    >>> paired_verdict([10.0, 9.8], [10.02, 10.0], True)
    ([0.998, 0.98], 'within noise')
    >>> paired_verdict([5, 6], [0, 6], True)
    ([1.0], 'within noise')
    """
    ratios = [round(a / b, 3) for a, b in zip(ours, theirs) if b]
    sign = 1 if higher_is_better else -1
    ahead = [sign * (r - 1) > TIE for r in ratios]
    behind = [sign * (r - 1) < -TIE for r in ratios]
    verdict = "ahead" if ratios and all(ahead) else "behind" if ratios and all(behind) else "within noise"
    return ratios, verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5, help="A/B pairs per comparison (default 5)")
    ap.add_argument("--only", default="", help="comma list of workloads to run")
    ap.add_argument("--wirebench", default="target/release/wirebench", help="wirebench binary")
    ap.add_argument("--total-tcp", type=int, default=GiB, help="bytes per TCP/QUIC run (default 1 GiB)")
    ap.add_argument("--total-udp", type=int, default=GiB // 2, help="bytes per UDP run (default 512 MiB)")
    ap.add_argument("--saw-msgs", type=int, default=30000, help="round trips per wirebench stop-and-wait run")
    ap.add_argument("--seconds", type=int, default=3,
                    help="length of every timed run: iperf3's (always -t, see iperf3_run) and the -P rows' (default 3)")
    ap.add_argument("--iperf3", default="iperf3", help="iperf3 binary (e.g. one built from esnet/iperf)")
    ap.add_argument("--sockperf", default="sockperf", help="sockperf binary")
    ap.add_argument("--quic-floor", default="target/release/examples/quic_floor",
                    help="bare quinn's stop-and-wait (cargo build --release --example quic_floor)")
    ap.add_argument("--out", default="bench/results.json", help="where to write the JSON results")
    ap.add_argument("--quinn-src", default=os.environ.get("QUINN_SRC", ""),
                    help="quinn source checkout for quinn-perf, QUIC's reference (default: $QUINN_SRC)")
    ap.add_argument("--quinn-seconds", type=int, default=5,
                    help="length of one quinn-perf client run (it repeats its request until then)")
    ap.add_argument("--pin", choices=["same", "cross"],
                    help="pin every server and client (taskset): all on CPU 1 (same), or servers on "
                         "CPU 0 and clients on CPU 1 (cross); what a 2-CPU machine measures steadily")
    args = ap.parse_args()
    global PIN
    PIN = {"same": ("1", "1"), "cross": ("0", "1")}.get(args.pin)

    if not os.access(args.wirebench, os.X_OK):
        sys.exit(f"{args.wirebench} not found: build it first with `cargo build --release`")
    tools = {"iperf3": args.iperf3, "nuttcp": "nuttcp", "sockperf": args.sockperf, "xfr": "xfr",
             "quic_floor": args.quic_floor}
    missing = [name for name, path in tools.items() if shutil.which(path) is None]
    if missing:
        print(f"reference tools missing: {' '.join(missing)} (apt-get install iperf3 nuttcp sockperf; "
              "cargo install xfr; cargo build --release --example quic_floor); their comparisons are skipped", file=sys.stderr)
    quinn_perf = quinn_perf_binary(args.quinn_src) if args.quinn_src else None
    if quinn_perf is None:
        missing.append("quinn")
        print("quinn-perf missing: get a quinn checkout (git clone https://github.com/quinn-rs/quinn) and "
              "pass --quinn-src PATH or set QUINN_SRC=PATH; the QUIC rows against it are skipped",
              file=sys.stderr)

    servers = Servers(args.wirebench)
    servers.quinn_perf, servers.quinn_seconds = quinn_perf, args.quinn_seconds
    servers.iperf3, servers.sockperf = args.iperf3, args.sockperf
    servers.quic_floor = args.quic_floor
    cores = os.cpu_count()
    iperf3_version = ""
    if "iperf3" not in missing:
        iperf3_version = subprocess.run([args.iperf3, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        # --gsro (GSO/GRO) is new in iperf3 3.21: its best UDP setting, a row of its own.
        usage = subprocess.run([args.iperf3, "--help"], capture_output=True, text=True).stdout
        if "--gsro" not in usage:
            missing.append("iperf3-gsro")
            print(f"{args.iperf3} has no --gsro (iperf3 3.21+; build it from esnet/iperf and pass "
                  "--iperf3 PATH): the iperf3-gsro rows are skipped", file=sys.stderr)
    placement = f"pinned {args.pin} CPU" if args.pin else "unpinned"
    quinn_version = quinn_proto_version(args.quinn_src) if quinn_perf else ""
    wirebench_quinn = linked_quinn_proto()
    print(f"machine: {cores} CPUs, kernel {os.uname().release}, {placement}; {iperf3_version or 'no iperf3'}"
          + (f"; quinn-perf on {quinn_version}, wirebench on {wirebench_quinn or '?'}"
             if quinn_version else ""), flush=True)
    servers.discovered_mtu = None
    results = {"host": os.uname().nodename, "kernel": os.uname().release, "cpus": cores, "pin": args.pin,
               "iperf3": iperf3_version, "quinn_perf": quinn_version,
               "wirebench_quinn": wirebench_quinn, "pairs": args.pairs, "workloads": []}
    rows = []
    # A time limit (`timeout`, bench/many-cores.sh) ends the run with SIGTERM: stop our servers
    # (they would otherwise run on beside the next pass) and keep the rows measured so far.
    signal.signal(signal.SIGTERM, _time_limit)
    try:
        p = servers.ports["wirebench"] = free_port()
        # Its iperf3 listener too, for the iperf3_server rows.
        q = servers.ports["wirebench_iperf3"] = free_port()
        servers.start("wirebench", [args.wirebench, "server", "--bind", HOST, "--port", str(p),
                                    "--iperf3", "--iperf3-port", str(q)], tcp_ready(p))
        if "iperf3" not in missing:
            p = servers.ports["iperf3"] = free_port()
            servers.start("iperf3", [args.iperf3, "-s", "-B", HOST, "-p", str(p)], tcp_ready(p))
        if "nuttcp" not in missing:
            p = servers.ports["nuttcp"] = free_port()
            # nuttcp's data port is its control port + 1.
            servers.start("nuttcp", ["nuttcp", "-S", "--nofork", f"-P{p}"], tcp_ready(p))
        if "xfr" not in missing:
            p = servers.ports["xfr"] = free_port()
            os.environ["XFR_NO_UPDATE_CHECK"] = "1"  # no network lookups from the benchmark
            servers.start("xfr", ["xfr", "serve", "-B", HOST, "-p", str(p), "--no-mdns"], tcp_ready(p))
        if "sockperf" not in missing:
            p = servers.ports["sockperf_tcp"] = free_port()
            servers.start("sockperf_tcp", [args.sockperf, "server", "-i", HOST, "-p", str(p), "--tcp"], tcp_ready(p))
            servers.ports["sockperf_udp"] = free_port()
            servers.start("sockperf_udp", [args.sockperf, "server", "-i", HOST, "-p", str(servers.ports["sockperf_udp"])])
            time.sleep(0.3)  # UDP has nothing to probe; give it a moment to bind

        only = set(filter(None, args.only.split(",")))
        for name, metric, higher, ours, refs in workloads(args.total_tcp, args.total_udp, args.saw_msgs, args.seconds):
            # A name in --only selects itself and every workload it prefixes (quic: all QUIC rows);
            # one ending in $ only itself (udp1472_P1$: not udp1472_P1_paced, whose search is slow).
            if only and not any(name == o or name + "$" == o or (not o.endswith("$") and name.startswith(o + "_"))
                                for o in only):
                continue
            for ref_name, ref in refs:
                tool = ref_name.split("-")[0]
                # iperf3-gsro-paced needs what iperf3-gsro needs.
                if tool in missing or any(ref_name == m or ref_name.startswith(m + "-") for m in missing):
                    continue
                why = placement_skip(name, ref_name, args.pin)
                if why:
                    print(f"{name} against {ref_name} skipped: {why}", file=sys.stderr, flush=True)
                    continue
                a, b = [], []
                for _ in range(args.pairs):
                    a.append(ours(servers))
                    if name.endswith("_pmtu") and servers.discovered_mtu is None:
                        servers.discovered_mtu = a[-1].get("path_mtu")
                    b.append(ref(servers))
                wa = summarise([r[metric] for r in a])
                wb = summarise([r[metric] for r in b])
                ratio = wa["median"] / wb["median"] if wb["median"] else float("nan")
                pair_ratios, verdict = paired_verdict([r[metric] for r in a], [r[metric] for r in b], higher)
                entry = {"workload": name, "metric": metric, "higher_is_better": higher, "reference": ref_name,
                         "wirebench": wa, "reference_figures": wb, "ratio": ratio,
                         "pair_ratios": pair_ratios, "verdict": verdict,
                         "wirebench_runs": a, "reference_runs": b}
                for side, runs in (("wirebench", a), ("reference", b)):
                    gib = sum(r.get("gib", 0) for r in runs)
                    if gib:
                        entry[f"{side}_client_cpu_s_per_gib"] = sum(r["client_cpu_s"] for r in runs) / gib
                        entry[f"{side}_server_cpu_s_per_gib"] = sum(r.get("server_cpu_s", 0) for r in runs) / gib
                if metric == "p50_us":
                    entry["p99_us"] = {"wirebench": statistics.median(r["p99_us"] for r in a),
                                       "reference": statistics.median(r["p99_us"] for r in b)}
                    # A p99 swings far more from run to run than a p50: its spread goes with it.
                    entry["p99_us_range"] = {"wirebench": [min(r["p99_us"] for r in a), max(r["p99_us"] for r in a)],
                                             "reference": [min(r["p99_us"] for r in b), max(r["p99_us"] for r in b)]}
                mtus = [r["path_mtu"] for r in a if r.get("path_mtu")]
                if mtus:
                    ref_mtu = None
                    if ref_name == "quinn-perf":
                        ref_mtu = quinn_perf_mtu(servers.discovered_mtu if name.endswith("_pmtu") else None)
                    entry["path_mtu"] = {"wirebench": statistics.median(mtus), "reference": ref_mtu}
                    entry["packets_per_gib"] = statistics.median(r["packets_per_gib"] for r in a)
                    windows = [r["send_window"] for r in a if r.get("send_window")]
                    if windows:
                        entry["send_window"] = statistics.median(windows)
                if all("loss_pct" in r for r in a + b):
                    entry["loss_pct"] = {"wirebench": statistics.median(r["loss_pct"] for r in a),
                                         "reference": statistics.median(r["loss_pct"] for r in b)}
                splits = [r["loss_split"] for r in a if "loss_split" in r]
                if splits:
                    entry["loss_split"] = {k: statistics.median(s[k] for s in splits)
                                           for k in ("receiving_host", "sending_host", "path")}
                    entry["lost"] = statistics.median(r["lost"] for r in a)
                if any("rate_found_gbit_s" in r for r in a):
                    entry["rate_found_gbit_s"] = statistics.median(r["rate_found_gbit_s"] for r in a)
                results["workloads"].append(entry)
                rows.append(entry)
                print_row(entry)
    except TimeLimit:
        print(f"\nstopped by SIGTERM (a time limit) after {len(rows)} rows; they follow in {args.out}", flush=True)
    finally:
        servers.stop()
    print_scaling(rows)
    print_behind(rows)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\nresults written to {args.out}")


class TimeLimit(Exception):
    """SIGTERM arrived: the run ends early, keeping what it measured."""


def _time_limit(_signum, _frame):
    raise TimeLimit()


def print_behind(rows):
    """The rows where every pair put wirebench behind its peer: the ones a ratio below 1.0 is
    more than the VM's noise for (a ratio below 1.0 whose pairs disagree is not)."""
    behind = [e for e in rows if e.get("verdict") == "behind"]
    if not behind:
        print("behind in every pair: none", flush=True)
        return
    print("behind in every pair: " + ", ".join(
        f"{e['workload']} vs {e['reference']} {e['ratio']:.2f}" for e in behind), flush=True)


def print_scaling(rows):
    """Issue 28's UDP scaling: -P 8 (unpaced and paced) against -P 1, for wirebench and iperf3."""
    med = {(e["workload"], side): e[key]["median"] for e in rows
           for side, key in (("w", "wirebench"), ("r", "reference_figures"))}
    loss = {e["workload"]: e.get("loss_pct", {}).get("wirebench") for e in rows}
    for name in ("udp1472_P8", "udp1472_P8_paced"):
        base = "udp1472_P1_paced" if name.endswith("_paced") and ("udp1472_P1_paced", "w") in med \
            else "udp1472_P1"
        if (name, "w") in med and (base, "w") in med and med[(base, "w")]:
            line = (f"scaling {name} / {base}: wirebench {med[(name, 'w')] / med[(base, 'w')]:.2f}x "
                    f"(loss {loss.get(name) or 0:.3f}%)")
            if med.get((base, "r")):
                line += f", iperf3 {med[(name, 'r')] / med[(base, 'r')]:.2f}x"
            print(line, flush=True)


def print_row(e):
    w, r = e["wirebench"], e["reference_figures"]
    better = "higher" if e["higher_is_better"] else "lower"
    line = (f"{e['workload']:<14} {e['metric']:<16} wirebench {w['median']:>12.3f} [{w['min']:.3f}-{w['max']:.3f}]  "
            f"{e['reference']:<13} {r['median']:>12.3f} [{r['min']:.3f}-{r['max']:.3f}]  "
            f"ratio {e['ratio']:.2f} ({better} is better)")
    pairs = e.get("pair_ratios") or []
    if pairs:
        line += f", pairs {min(pairs):.2f}-{max(pairs):.2f}: {e['verdict']}"
    extra = []
    if "p99_us" in e:
        spread = e.get("p99_us_range", {})
        span = lambda side: (f" [{spread[side][0]:.1f}-{spread[side][1]:.1f}]" if side in spread else "")
        extra.append(f"p99 {e['p99_us']['wirebench']:.1f}{span('wirebench')} vs "
                     f"{e['p99_us']['reference']:.1f}{span('reference')} us")
    if "path_mtu" in e:
        ref_mtu = e["path_mtu"]["reference"]
        extra.append(f"MTU {e['path_mtu']['wirebench']:.0f}" + (f" vs {ref_mtu}" if ref_mtu else "")
                     + f", {e['packets_per_gib']:.0f} packets/GiB"
                     + (f", send window {e['send_window'] / 1024:.0f} KiB" if "send_window" in e else ""))
    if "loss_pct" in e:
        extra.append(f"loss {e['loss_pct']['wirebench']:.2f}% vs {e['loss_pct']['reference']:.2f}%")
    if "loss_split" in e and e.get("lost"):
        s = e["loss_split"]
        extra.append(f"wirebench lost {e['lost']:.0f}: receiving host {s['receiving_host']:.0f}, "
                     f"sending host {s['sending_host']:.0f}, path {s['path']:.0f}")
    if "rate_found_gbit_s" in e:
        extra.append(f"paced at {e['rate_found_gbit_s']:.2f} Gbit/s in all")
    if "p99_us" in e and e["p99_us"]["reference"]:
        extra.append(f"p99 ratio {e['p99_us']['wirebench'] / e['p99_us']['reference']:.2f}")
    if "wirebench_client_cpu_s_per_gib" in e:
        extra.append("cpu s/GiB client+server {:.2f}+{:.2f} vs {:.2f}+{:.2f}".format(
            e["wirebench_client_cpu_s_per_gib"], e["wirebench_server_cpu_s_per_gib"],
            e.get("reference_client_cpu_s_per_gib", 0), e.get("reference_server_cpu_s_per_gib", 0)))
    print(line + ("\n" + " " * 15 + "; ".join(extra) if extra else ""), flush=True)


if __name__ == "__main__":
    main()
