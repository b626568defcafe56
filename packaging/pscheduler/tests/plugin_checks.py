#!/usr/bin/env python3
"""Checks of the wirebench pScheduler plugin's outputs, for .ci/pscheduler-check (which runs
the executables and the processes; this only builds inputs and judges outputs).

    plugin_checks.py make-input PREFIX SPEC_JSON PDATA_FILE...   run inputs PREFIX-0.json, -1.json
    plugin_checks.py make-test-input TYPE PREFIX SPEC_JSON PDATA_FILE   a one-participant run input
    plugin_checks.py enumerate FILE VERSION
    plugin_checks.py can-run FILE yes|no [TEXT...]                each TEXT in some reason
    plugin_checks.py duration FILE ISO8601
    plugin_checks.py participant-data FILE 0|1 PORT
    plugin_checks.py tcp RESULT                                   prints a one-line summary
    plugin_checks.py udp RESULT BANDWIDTH
    plugin_checks.py loopback RESULT
    plugin_checks.py server RESULT
    plugin_checks.py failed RESULT TEXT
    plugin_checks.py merged MERGED CLIENT_RESULT [TEST]
    plugin_checks.py rtt RESULT PROTOCOL COUNT|-                  prints a one-line summary
    plugin_checks.py rtt-lossy RESULT COUNT                       UDP, some probes lost
    plugin_checks.py latency RESULT COUNT BUCKET LOW_MS HIGH_MS   one-way delays within the range

Several checks can be given at once, separated by ';;'.  Each prints one line; the first wrong
output prints FAILED with the reason and exits 1.
"""

import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "wirebench"))

import validate_result  # noqa: E402
import wirebench_plugin  # noqa: E402


class CheckFailed(Exception):
    pass


def expect(condition, what):
    if not condition:
        raise CheckFailed(what)


def load(path):
    with open(path) as handle:
        text = handle.read()
    try:
        return json.loads(text)
    except ValueError as ex:
        raise CheckFailed("%s is not JSON (%s): %r" % (path, ex, text[:300]))


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def schema_valid(result, path, test="throughput"):
    """Valid against the vendored result schema: with jsonschema where importable, and with
    the structural checker always (so that the fallback is tested too)."""
    schema = validate_result.load_schema(test)
    names = []
    for structural in (False, True):
        name, errors = validate_result.validate(result, schema, structural)
        expect(not errors, "%s is not valid against the %s result schema (%s): %s"
               % (path, test, name, "; ".join(errors[:5])))
        if name not in names:
            names.append(name)
    return " and ".join(names)


def document(result, marker=wirebench_plugin.DOC_MARKER):
    """wirebench's -J document, from the client's diags."""
    diags = result.get("diags", "")
    at = diags.find(marker)
    expect(at >= 0, "the diags hold no wirebench document")
    # The document is followed by other text in a loopback result's diags (the server's).
    doc, _ = json.JSONDecoder().raw_decode(diags[at + len(marker):].lstrip())
    return doc


def succeeded(result, path):
    expect(result.get("succeeded") is True,
           "%s did not succeed: %s" % (path, result.get("error", "(no error)")))
    expect(result["intervals"], "%s has no intervals" % path)
    for interval in result["intervals"]:
        expect(interval["streams"], "%s: an interval without streams" % path)
        for stream in interval["streams"]:
            expect("stream-id" in stream, "%s: an interval stream without stream-id" % path)
    expect(result["summary"]["streams"], "%s: the summary has no streams" % path)


def make_input(prefix, spec_json, *pdata_files):
    spec = json.loads(spec_json)
    pdata = [load(p) for p in pdata_files]
    start = datetime.datetime.now(datetime.timezone.utc).isoformat()
    for participant in range(len(pdata)):
        request = {
            "schema": 1,
            "task-uuid": "00000000-0000-0000-0000-000000000000",
            "schedule": {"start": start, "duration": "PT30S"},
            "test": {"type": "throughput", "spec": spec},
            "participant": participant,
            "participant-data": pdata,
        }
        with open("%s-%d.json" % (prefix, participant), "w") as handle:
            json.dump(request, handle)
    return "run inputs for %d participant(s), start %s" % (len(pdata), start)


def make_test_input(test_type, prefix, spec_json, pdata_file):
    """The run input of a one-participant test (rtt, latency), or of a test wirebench
    refuses."""
    request = {
        "schema": 1,
        "task-uuid": "00000000-0000-0000-0000-000000000000",
        "schedule": {"start": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                     "duration": "PT30S"},
        "test": {"type": test_type, "spec": json.loads(spec_json)},
        "participant": 0,
        "participant-data": [load(pdata_file)],
    }
    with open("%s-0.json" % prefix, "w") as handle:
        json.dump(request, handle)
    return "run input for %s, start %s" % (test_type, request["schedule"]["start"])


def check_enumerate(path, version):
    d = load(path)
    allowed = {"schema", "name", "description", "version", "tests", "preference", "maintainer",
               "scheduling-class"}
    expect(set(d) <= allowed, "enumerate has keys pScheduler does not take: %s"
           % sorted(set(d) - allowed))
    for key in ("name", "description", "version", "tests", "preference", "maintainer"):
        expect(key in d, "enumerate has no %s" % key)
    expect(d["name"] == "wirebench", "enumerate's name is %r" % d["name"])
    expect(d["tests"] == ["throughput", "rtt", "latency"], "enumerate's tests are %r" % d["tests"])
    expect(d["version"] == version, "enumerate's version %r is not wirebench --version's %r"
           % (d["version"], version))
    expect(is_int(d["preference"]), "enumerate's preference is not an integer")
    expect(isinstance(d["maintainer"].get("name"), str), "enumerate's maintainer has no name")
    return "enumerate: wirebench %s, tests %s, preference %d" % (d["version"], d["tests"],
                                                                  d["preference"])


def check_can_run(path, answer, *texts):
    d = load(path)
    expect(set(d) <= {"can-run", "reasons"}, "can-run has other keys: %s" % sorted(d))
    want = answer == "yes"
    expect(d.get("can-run") is want, "can-run said %r, not %r (reasons: %s)"
           % (d.get("can-run"), want, d.get("reasons")))
    if not want:
        reasons = d.get("reasons")
        expect(isinstance(reasons, list) and reasons and all(isinstance(r, str) for r in reasons),
               "can-run said no without reasons")
        for text in texts:
            expect(any(text in r for r in reasons), "no reason mentions %r: %s" % (text, reasons))
    return "can-run: %s%s" % (answer, " (%s)" % "; ".join(d.get("reasons", [])) if not want else "")


def check_duration(path, expected):
    d = load(path)
    expect(d == {"duration": expected}, "duration said %r, not %r" % (d, expected))
    return "duration: %s" % expected


def check_participant_data(path, participant, port):
    d = load(path)
    if participant == "0":
        expect("server-port" not in d and "_psk" not in d,
               "participant 0 announces a server: %s" % d)
    else:
        expect(d.get("server-port") == int(port), "participant 1 announces port %r, not %s"
               % (d.get("server-port"), port))
        expect(wirebench_plugin.valid_psk(d.get("_psk")), "participant 1 has no usable _psk")
    return "participant-data %s: %s" % (participant, sorted(d))


def check_tcp(path):
    result = load(path)
    succeeded(result, path)
    validators = schema_valid(result, path)
    summary = result["summary"]["summary"]
    doc = document(result)
    received = doc["end"]["sum_received"]["bytes"]
    expect(summary["throughput-bytes"] > 0, "TCP: throughput-bytes is 0")
    expect(summary["throughput-bytes"] == received,
           "TCP: throughput-bytes %r is not end.sum_received.bytes %r"
           % (summary["throughput-bytes"], received))
    expect(summary["throughput-bits"] > 0, "TCP: throughput-bits is 0")
    expect(is_int(summary.get("retransmits")), "TCP: the summary has no retransmits")
    return ("TCP: %.1f Mbit/s, %d bytes = end.sum_received.bytes, %d retransmits, %d intervals;"
            " valid (%s)" % (summary["throughput-bits"] / 1e6, summary["throughput-bytes"],
                             summary["retransmits"], len(result["intervals"]), validators))


def check_udp(path, bandwidth):
    result = load(path)
    succeeded(result, path)
    validators = schema_valid(result, path)
    summary = result["summary"]["summary"]
    expect(is_int(summary.get("sent")) and summary["sent"] > 0, "UDP: no datagrams sent")
    expect(is_int(summary.get("lost")) and 0 <= summary["lost"] <= summary["sent"],
           "UDP: lost is not a count within sent")
    expect(isinstance(summary.get("jitter"), (int, float)), "UDP: no jitter")
    bits = summary["throughput-bits"]
    # Paced at the spec's bandwidth (bits/s): a wrong unit would be 8x or 1000x off.
    expect(0 < bits <= 1.5 * int(bandwidth), "UDP: %.0f bit/s for a bandwidth of %s" % (bits, bandwidth))
    doc = document(result)
    expect(summary["sent"] == doc["end"]["sum"]["packets"], "UDP: sent is not end.sum.packets")
    return ("UDP: %.1f Mbit/s (bandwidth %.1f), %d datagrams sent, %d lost, jitter %.4f ms;"
            " valid (%s)" % (bits / 1e6, int(bandwidth) / 1e6, summary["sent"], summary["lost"],
                             summary["jitter"], validators))


def check_loopback(path):
    result = load(path)
    succeeded(result, path)
    validators = schema_valid(result, path)
    summary = result["summary"]["summary"]
    expect(summary["throughput-bytes"] > 0, "loopback: throughput-bytes is 0")
    expect(len(result["summary"]["streams"]) == 2, "loopback: not 2 streams (-P 2)")
    expect("Server:" in result["diags"] and "one session served" in result["diags"],
           "loopback: the server's diags are missing")
    doc = document(result)
    expect(doc["start"]["test_start"]["reverse"] == 1, "loopback: not a reverse (-R) run")
    return ("loopback -R -P 2: %.1f Mbit/s, %d bytes; valid (%s)"
            % (summary["throughput-bits"] / 1e6, summary["throughput-bytes"], validators))


def check_server(path):
    result = load(path)
    expect(result.get("succeeded") is True, "the server side failed: %s" % result.get("error"))
    expect("one session served" in result.get("diags", ""), "the server's diags lack its session")
    return "server: one session served, stopped"


def check_failed(path, text):
    result = load(path)
    expect(result.get("succeeded") is False, "%s succeeded, but should have failed" % path)
    expect(text in result.get("error", ""), "the error does not say %r: %r"
           % (text, result.get("error")))
    expect(isinstance(result.get("diags"), str), "the failed result has no diags")
    return "failure reported: %s" % result["error"].split("\n")[0][:120]


def check_merged(path, client_path, test="throughput"):
    merged = load(path)
    client = load(client_path)
    expect({k: v for k, v in merged.items() if k != "diags"}
           == {k: v for k, v in client.items() if k != "diags"},
           "merged-results is not the client's result")
    expect(merged["diags"].startswith("Participant 0:"), "merged diags lack participant 0's")
    if merged.get("succeeded"):
        schema_valid(merged, path, test)
    if test == "rtt":
        return "merged-results (rtt): the one participant's result and diags"
    return "merged-results: the client's result, both participants' diags"


def seconds(iso):
    return wirebench_plugin.iso8601_seconds(iso)


def check_rtt(path, protocol, count):
    """An rtt result: valid against the rtt result schema, its figures those of wirebench
    ping's document (in the diags), count probes sent (COUNT; '-': a deadline's worth), each
    answered or lost, min <= mean <= max; no loss over TCP."""
    result = load(path)
    expect(result.get("succeeded") is True,
           "%s did not succeed: %s" % (path, result.get("error", "(no error)")))
    validators = schema_valid(result, path, "rtt")
    expect(result["roundtrips"] == [], "rtt: roundtrips is not the empty list (summary only)")
    doc = document(result, wirebench_plugin.PING_DOC_MARKER)
    expect(doc["command"] == "ping" and len(doc["results"]) == 1, "rtt: not one ping result")
    r = doc["results"][0]
    expect(r["protocol"] == protocol, "rtt: wirebench pinged over %s, not %s"
           % (r["protocol"], protocol))
    sent, received, lost = result["sent"], result["received"], result["lost"]
    if count != "-":
        expect(sent == int(count), "rtt: %d probes sent, %s asked" % (sent, count))
        expect(r["count_per_flow"] == int(count), "rtt: wirebench was asked for %r probes"
               % r["count_per_flow"])
    expect(sent >= 1 and received + lost == sent,
           "rtt: received %d + lost %d is not sent %d" % (received, lost, sent))
    expect((sent, received, lost) == (r["sent"], r["answered"], r["lost"]),
           "rtt: sent/received/lost are not wirebench's sent/answered/lost")
    expect(abs(result["loss"] - lost / float(sent)) < 1e-12, "rtt: loss is not lost / sent")
    expect(received >= 1, "rtt: no probe answered")
    figures = {key: seconds(result[key]) for key in ("min", "mean", "max", "stddev")}
    expect(0 < figures["min"] <= figures["mean"] <= figures["max"],
           "rtt: not 0 < min <= mean <= max: %s" % figures)
    expect(figures["stddev"] >= 0, "rtt: negative stddev")
    expect(figures["max"] < 1.0, "rtt: a round trip of %gs on loopback" % figures["max"])
    for key, value in figures.items():
        ns = r["response"][key + "_ns"]
        expect(abs(value * 1e9 - ns) < 1.0, "rtt: %s %s is not wirebench's %s_ns %r"
               % (key, result[key], key, ns))
    if protocol != "udp":
        expect(lost == 0 and result["loss"] == 0 and received == sent,
               "rtt: %s lost %d of %d probes on loopback" % (protocol, lost, sent))
    return ("rtt %s: %d/%d answered, loss %g, min/mean/max %.3f/%.3f/%.3f ms; valid (%s)"
            % (protocol.upper(), received, sent, result["loss"], figures["min"] * 1e3,
               figures["mean"] * 1e3, figures["max"] * 1e3, validators))


def check_rtt_lossy(path, count):
    """An rtt result through a relay that drops UDP datagrams: some probes lost, some
    answered, and the result still valid and consistent."""
    line = check_rtt(path, "udp", count)
    result = load(path)
    expect(0 < result["lost"] < result["sent"],
           "rtt through a lossy relay: %d of %d lost" % (result["lost"], result["sent"]))
    return line.replace("rtt UDP:", "rtt UDP through a lossy relay:", 1)


def check_latency(path, count, bucket, low_ms, high_ms):
    """A latency result: valid against the latency result schema, COUNT probes sent, each
    received or lost, a clock bound under a millisecond (one host), its histogram counting the
    received probes, and every bin's delay (key x BUCKET seconds) within LOW_MS..HIGH_MS."""
    result = load(path)
    expect(result.get("succeeded") is True,
           "%s did not succeed: %s" % (path, result.get("error", "(no error)")))
    validators = schema_valid(result, path, "latency")
    sent, received = result["packets-sent"], result["packets-received"]
    expect(sent == int(count), "latency: %d packets sent, %s asked" % (sent, count))
    expect(received + result["packets-lost"] == sent, "latency: received + lost is not sent")
    expect(0 <= result["max-clock-error"] < 1.0,
           "latency: max-clock-error %r ms on one host" % result["max-clock-error"])
    doc = document(result, wirebench_plugin.PING_DOC_MARKER)
    listed = doc["results"][0]["one_way"]["probes"]
    expect(len(listed) == received, "latency: wirebench listed %d probes, %d received"
           % (len(listed), received))
    histogram = result["histogram-latency"]
    expect(sum(histogram.values()) == received,
           "latency: the histogram counts %d packets, %d received"
           % (sum(histogram.values()), received))
    delays = sorted(float(k) * float(bucket) * 1e3 for k in histogram)
    expect(delays and float(low_ms) <= delays[0] and delays[-1] <= float(high_ms),
           "latency: delays %s ms, not within %s..%s ms" % (delays, low_ms, high_ms))
    return ("latency: %d/%d received, one-way %.2f..%.2f ms, max-clock-error %.4f ms; valid (%s)"
            % (received, sent, delays[0], delays[-1], result["max-clock-error"], validators))


CHECKS = {
    "make-input": make_input,
    "make-test-input": make_test_input,
    "enumerate": check_enumerate,
    "can-run": check_can_run,
    "duration": check_duration,
    "participant-data": check_participant_data,
    "tcp": check_tcp,
    "udp": check_udp,
    "loopback": check_loopback,
    "server": check_server,
    "failed": check_failed,
    "merged": check_merged,
    "rtt": check_rtt,
    "rtt-lossy": check_rtt_lossy,
    "latency": check_latency,
}


def main(argv):
    """One check, or several separated by ';;' (one process for many, on a busy machine)."""
    checks = [[]]
    for arg in argv:
        if arg == ";;":
            checks.append([])
        else:
            checks[-1].append(arg)
    checks = [c for c in checks if c]
    if not checks or any(c[0] not in CHECKS for c in checks):
        sys.stderr.write(__doc__)
        return 2
    for check in checks:
        try:
            print(CHECKS[check[0]](*check[1:]))
        except (CheckFailed, KeyError, TypeError, ValueError) as ex:
            print("FAILED %s: %s: %s" % (check[0], type(ex).__name__, ex))
            return 1
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
