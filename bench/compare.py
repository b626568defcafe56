#!/usr/bin/env python3
"""Side-by-side benchmark: wirebench against iperf3, nuttcp, sockperf and xfr on loopback.

Runs every workload for wirebench and its reference tool *alternately* (A B A B ...), so slow
drifts of a noisy VM hit both equally, then prints medians with min-max and the ratio
wirebench / reference. CPU seconds per GiB are measured for client and server processes from
getrusage (client) and /proc/PID/stat (server). Results are also written as JSON.

It installs nothing: missing reference tools are reported and their workloads skipped.
Usage: bench/compare.py [--pairs 5] [--only tcp128k,udp1024,...] [--out FILE]
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
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def tcp_ready(port):
    def probe():
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return True
        except OSError:
            return False
    return probe


# --- one measurement per tool -------------------------------------------------------------

def wirebench_run(servers, proto, mode, size, total, extra=()):
    port = servers.ports["wirebench"]
    pid = servers.pid("wirebench")
    srv0 = proc_cpu_seconds(pid)
    out, cpu = run_client([servers.wirebench, "run", "--server", f"{HOST}:{port}", "--proto", proto,
                           "--mode", mode, "-l", str(size), "-n", str(total), "--json", "--no-store", *extra])
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
            res["loss_pct"] = run["headline"]["delivery"]["lost_pct"]
    res["data_path"] = {"client": c["data_path"], "server": s["data_path"]}
    return res


def wirebench_ping(servers, proto, size, count):
    """`wirebench ping`: one flow, one probe outstanding, SIZE-byte probes and answers."""
    port = servers.ports["wirebench"]
    out, cpu = run_client([servers.wirebench, "ping", "--server", f"{HOST}:{port}", "--proto", proto,
                           "-l", str(size), "--count", str(count), "--json"])
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


def iperf3_run(servers, udp, size, total):
    port = servers.ports["iperf3"]
    pid = servers.pid("iperf3")
    srv0 = proc_cpu_seconds(pid)
    cmd = ["iperf3", "-c", HOST, "-p", str(port), "-n", str(total), "-l", str(size), "-J"]
    if udp:
        cmd += ["-u", "-b", "0"]
    out, cpu = run_client(cmd)
    srv_cpu = proc_cpu_seconds(pid) - srv0
    end = json.loads(out)["end"]
    res = {"client_cpu_s": cpu, "server_cpu_s": srv_cpu, "gib": total / GiB}
    if udp:
        s = end["sum"]
        delivered = s["packets"] - s["lost_packets"]
        res["datagrams_per_s"] = delivered / s["seconds"] if s["seconds"] else 0
        res["loss_pct"] = s["lost_percent"]
        res["gbit_s"] = delivered * size * 8 / s["seconds"] / 1e9
    else:
        res["gbit_s"] = end["sum_received"]["bits_per_second"] / 1e9
    return res


def nuttcp_run(servers, size, total):
    port = servers.ports["nuttcp"]
    pid = servers.pid("nuttcp")
    srv0 = proc_cpu_seconds(pid)
    out, cpu = run_client(["nuttcp", f"-P{port}", f"-l{size}", f"-n{total // size}", "-fparse", HOST])
    srv_cpu = proc_cpu_seconds(pid) - srv0
    rate = float(re.search(r"rate_Mbps=([\d.]+)", out).group(1))
    return {"gbit_s": rate / 1000, "client_cpu_s": cpu, "server_cpu_s": srv_cpu, "gib": total / GiB}


def sockperf_run(servers, tcp, size, seconds=3):
    port = servers.ports["sockperf_tcp" if tcp else "sockperf_udp"]
    cmd = ["sockperf", "ping-pong", "-i", HOST, "-p", str(port), "-m", str(size), "-t", str(seconds), "--full-rtt"]
    if tcp:
        cmd.append("--tcp")
    out, cpu = run_client(cmd)
    pct = {m.group(1): float(m.group(2)) for m in re.finditer(r"percentile (\d+\.\d+) =\s+([\d.]+)", out)}
    return {"p50_us": pct["50.000"], "p99_us": pct["99.000"], "client_cpu_s": cpu}


# --- workloads ----------------------------------------------------------------------------

def workloads(total_tcp, total_udp, saw_msgs):
    """(name, metric, higher_is_better, wirebench thunk, [(reference name, thunk)])"""
    return [
        ("tcp128k", "gbit_s", True, lambda s: wirebench_run(s, "tcp", "stream", 131072, total_tcp),
         [("iperf3", lambda s: iperf3_run(s, False, 131072, total_tcp))]),
        ("tcp1k", "gbit_s", True, lambda s: wirebench_run(s, "tcp", "stream", 1024, total_tcp),
         [("nuttcp", lambda s: nuttcp_run(s, 1024, total_tcp)),
          ("iperf3", lambda s: iperf3_run(s, False, 1024, total_tcp))]),
        ("udp1024", "datagrams_per_s", True, lambda s: wirebench_run(s, "udp", "stream", 1024, total_udp),
         [("iperf3", lambda s: iperf3_run(s, True, 1024, total_udp))]),
        ("udp1472", "datagrams_per_s", True, lambda s: wirebench_run(s, "udp", "stream", 1472, total_udp),
         [("iperf3", lambda s: iperf3_run(s, True, 1472, total_udp))]),
        # Paced: the same datagrams at a fixed offered rate well above what iperf3 delivers,
        # to compare delivered datagrams/s at equal or lower loss (the unpaced runs above
        # send so fast that the receiver, on the same two vCPUs, drops some).
        ("udp1024paced", "datagrams_per_s", True,
         lambda s: wirebench_run(s, "udp", "stream", 1024, total_udp, ["--rate", "4Gbit"]),
         [("iperf3", lambda s: iperf3_run(s, True, 1024, total_udp))]),
        ("udp1472paced", "datagrams_per_s", True,
         lambda s: wirebench_run(s, "udp", "stream", 1472, total_udp, ["--rate", "6Gbit"]),
         [("iperf3", lambda s: iperf3_run(s, True, 1472, total_udp))]),
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
        ("quic1k", "gbit_s", True, lambda s: wirebench_run(s, "quic", "stream", 1024, total_tcp),
         [("wirebench-tcp", lambda s: wirebench_run(s, "tcp", "stream", 1024, total_tcp))]),
        ("quic128k", "gbit_s", True, lambda s: wirebench_run(s, "quic", "stream", 131072, total_tcp),
         [("xfr-quic", lambda s: xfr_run(s, "quic", 0, total_tcp))]),
        ("udp1472xfr", "gbit_s", True, lambda s: wirebench_run(s, "udp", "stream", 1472, total_udp),
         [("xfr-udp", lambda s: xfr_run(s, "udp", 1472, 0))]),
    ]


def summarise(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5, help="A/B pairs per comparison (default 5)")
    ap.add_argument("--only", default="", help="comma list of workloads to run")
    ap.add_argument("--wirebench", default="target/release/wirebench", help="wirebench binary")
    ap.add_argument("--total-tcp", type=int, default=GiB, help="bytes per TCP/QUIC run (default 1 GiB)")
    ap.add_argument("--total-udp", type=int, default=GiB // 2, help="bytes per UDP run (default 512 MiB)")
    ap.add_argument("--saw-msgs", type=int, default=30000, help="round trips per wirebench stop-and-wait run")
    ap.add_argument("--out", default="bench/results.json", help="where to write the JSON results")
    args = ap.parse_args()

    if not os.access(args.wirebench, os.X_OK):
        sys.exit(f"{args.wirebench} not found: build it first with `cargo build --release`")
    missing = [t for t in ("iperf3", "nuttcp", "sockperf", "xfr") if shutil.which(t) is None]
    if missing:
        print(f"reference tools missing: {' '.join(missing)} (apt-get install iperf3 nuttcp sockperf; "
              "cargo install xfr); their comparisons are skipped", file=sys.stderr)

    servers = Servers(args.wirebench)
    results = {"host": os.uname().nodename, "kernel": os.uname().release, "pairs": args.pairs, "workloads": []}
    try:
        p = servers.ports["wirebench"] = free_port()
        servers.start("wirebench", [args.wirebench, "server", "--bind", HOST, "--port", str(p)], tcp_ready(p))
        if "iperf3" not in missing:
            p = servers.ports["iperf3"] = free_port()
            servers.start("iperf3", ["iperf3", "-s", "-B", HOST, "-p", str(p)], tcp_ready(p))
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
            servers.start("sockperf_tcp", ["sockperf", "server", "-i", HOST, "-p", str(p), "--tcp"], tcp_ready(p))
            servers.ports["sockperf_udp"] = free_port()
            servers.start("sockperf_udp", ["sockperf", "server", "-i", HOST, "-p", str(servers.ports["sockperf_udp"])])
            time.sleep(0.3)  # UDP has nothing to probe; give it a moment to bind

        only = set(filter(None, args.only.split(",")))
        rows = []
        for name, metric, higher, ours, refs in workloads(args.total_tcp, args.total_udp, args.saw_msgs):
            if only and name not in only:
                continue
            for ref_name, ref in refs:
                tool = ref_name.split("-")[0]
                if tool in missing:
                    continue
                a, b = [], []
                for _ in range(args.pairs):
                    a.append(ours(servers))
                    b.append(ref(servers))
                wa = summarise([r[metric] for r in a])
                wb = summarise([r[metric] for r in b])
                ratio = wa["median"] / wb["median"] if wb["median"] else float("nan")
                entry = {"workload": name, "metric": metric, "higher_is_better": higher, "reference": ref_name,
                         "wirebench": wa, "reference_figures": wb, "ratio": ratio,
                         "wirebench_runs": a, "reference_runs": b}
                for side, runs in (("wirebench", a), ("reference", b)):
                    gib = sum(r.get("gib", 0) for r in runs)
                    if gib:
                        entry[f"{side}_client_cpu_s_per_gib"] = sum(r["client_cpu_s"] for r in runs) / gib
                        entry[f"{side}_server_cpu_s_per_gib"] = sum(r.get("server_cpu_s", 0) for r in runs) / gib
                if metric == "p50_us":
                    entry["p99_us"] = {"wirebench": statistics.median(r["p99_us"] for r in a),
                                       "reference": statistics.median(r["p99_us"] for r in b)}
                if metric == "datagrams_per_s":
                    entry["loss_pct"] = {"wirebench": statistics.median(r["loss_pct"] for r in a),
                                         "reference": statistics.median(r["loss_pct"] for r in b)}
                results["workloads"].append(entry)
                rows.append(entry)
                print_row(entry)
    finally:
        servers.stop()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\nresults written to {args.out}")


def print_row(e):
    w, r = e["wirebench"], e["reference_figures"]
    better = "higher" if e["higher_is_better"] else "lower"
    line = (f"{e['workload']:<11} {e['metric']:<16} wirebench {w['median']:>12.3f} [{w['min']:.3f}-{w['max']:.3f}]  "
            f"{e['reference']:<13} {r['median']:>12.3f} [{r['min']:.3f}-{r['max']:.3f}]  "
            f"ratio {e['ratio']:.2f} ({better} is better)")
    extra = []
    if "p99_us" in e:
        extra.append(f"p99 {e['p99_us']['wirebench']:.1f} vs {e['p99_us']['reference']:.1f} us")
    if "loss_pct" in e:
        extra.append(f"loss {e['loss_pct']['wirebench']:.2f}% vs {e['loss_pct']['reference']:.2f}%")
    if "wirebench_client_cpu_s_per_gib" in e:
        extra.append("cpu s/GiB client+server {:.2f}+{:.2f} vs {:.2f}+{:.2f}".format(
            e["wirebench_client_cpu_s_per_gib"], e["wirebench_server_cpu_s_per_gib"],
            e.get("reference_client_cpu_s_per_gib", 0), e.get("reference_server_cpu_s_per_gib", 0)))
    print(line + ("\n" + " " * 12 + "; ".join(extra) if extra else ""), flush=True)


if __name__ == "__main__":
    main()
