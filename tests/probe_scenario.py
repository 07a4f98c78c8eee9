"""The probe scenario of the tests and the benchmark: iperf3 between network
namespaces through a small HTB + bfifo bottleneck, recorded by the eBPF hook
and the stock tracepoint at once, with `ss -tie` samples taken meanwhile and
the path blackholed for a while to force timeouts. It runs on the host (the
tests import it) and inside a virtme-ng guest (`python3 probe_scenario.py OUT`
writes OUT/result.json), so both kernels are checked the same way.

Namespaces are named tcpvar-<tag>-{s,r,d}: sender, router, receiver, built
by tcpvar's testbed library.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from tcpvar.capture import traffic
from tcpvar.capture.testbed import Testbed
from tcpvar.capture.testbed import line as plan_line

PORT = 5201
SND_ADDR, RCV_ADDR = "198.18.1.1", "198.18.2.2"


@contextlib.contextmanager
def Dumbbell(rate: str | None = "20mbit", limit_bytes: int = 30000, offload: bool = False):
    """sender (s) -- router (r) -- receiver (d) of tcpvar's testbed library;
    a bottleneck (HTB at @rate over a bfifo of @limit_bytes) on the router's
    egress towards the receiver when @rate is given; @offload keeps the
    kernel's offloads, else TSO, GSO and GRO are off (real segments, as a
    NIC puts them on the wire)."""
    with Testbed() as bed:
        plan_line(bed, ["s", "r", "d"])
        bed.up(offloads=None if offload else False)
        if rate:
            tc = ["tc", "qdisc", "add", "dev", "d"]
            bed.run("r", [*tc, "root", "handle", "1:", "htb", "default", "1"])
            bed.run("r", ["tc", "class", "add", "dev", "d", "parent", "1:", "classid", "1:1",
                          "htb", "rate", rate, "ceil", rate])
            bed.run("r", [*tc, "parent", "1:1", "handle", "10:", "bfifo",
                          "limit", str(limit_bytes)])
        yield bed


def blackhole(bed: Testbed, on: bool) -> None:
    """Drop everything the router would forward to the receiver."""
    bed.run("r", ["ip", "route", "add" if on else "del", "blackhole", RCV_ADDR + "/32"])


@contextlib.contextmanager
def iperf_server(bed: Testbed, port: int = PORT):
    srv = traffic.iperf_server(bed, "d", port)
    try:
        yield srv
    finally:
        bed.procs.stop(srv)


def iperf_client(bed: Testbed, seconds: float, cc: str = "cubic", port: int = PORT,
                 parallel: int = 1) -> subprocess.Popen:
    return traffic.iperf_client(bed, "s", RCV_ADDR, port,
                                ["-t", str(seconds), "-C", cc, "-P", str(parallel)])


SS_RE = {k: re.compile(p) for k, p in {
    "cookie": r"\bsk:([0-9a-f]+)", "rto_ms": r"\brto:([\d.]+)",
    "rtt": r"\brtt:([\d.]+)/([\d.]+)", "cwnd": r"\bcwnd:(\d+)"}.items()}


def ss_sample(net: Testbed, port: int = PORT) -> list[dict]:
    """`ss -tie` of the sender's sockets to the port, bracketed by the times."""
    t0 = time.time_ns()
    out = net.run("s", ["ss", "-Htie", "state", "established", f"dport = :{port}"])
    t1 = time.time_ns()
    rows = []
    for line in out.replace("\n\t", " ").splitlines():
        m = {k: r.search(line) for k, r in SS_RE.items()}
        if not (m["cookie"] and m["rto_ms"] and m["rtt"]):
            continue
        rows.append({"t0": t0, "t1": t1, "cookie": int(m["cookie"].group(1), 16),
                     "rto_us": round(float(m["rto_ms"].group(1)) * 1000),
                     "srtt_us": round(float(m["rtt"].group(1)) * 1000),
                     "rttvar_us": round(float(m["rtt"].group(2)) * 1000),
                     "cwnd": int(m["cwnd"].group(1)) if m["cwnd"] else None})
    return rows


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _num(v: str):
    return int(v) if v not in ("", None) else None


def by_cookie(rows: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(int(r["cookie"]), []).append(r)
    for evs in out.values():
        evs.sort(key=lambda r: int(r["ts_ns"]))
    return out


def compare_sources(hook: list[dict], stock: list[dict], window_ns: int = 50_000_000) -> dict:
    """Pair the hook's events with the tracepoint's (same socket, same sequence
    numbers, payload and windows, the nearest in time within `window_ns`: under
    TCG emulation the two probes of one event can be milliseconds apart)
    walking both in time order; then compare cwnd, ssthresh, srtt and the
    addresses of every pair."""
    h, s = by_cookie(hook), by_cookie(stock)
    same = ("snd_nxt", "snd_una", "data_len", "snd_wnd", "rcv_wnd")
    fields = ("snd_cwnd", "ssthresh", "srtt_us", "sport", "dport", "saddr", "daddr")
    res = {"cookies_hook": len(h), "cookies_stock": len(s), "paired": 0, "mismatched": 0,
           "hook_only": 0, "stock_only": 0, "max_dt_us": 0.0, "examples": []}
    for cookie in sorted(set(h) | set(s)):
        a, b = h.get(cookie, []), s.get(cookie, [])
        i = j = 0
        while i < len(a) and j < len(b):
            x, y = a[i], b[j]
            tx = int(x["ts_ns"])
            dt = tx - int(y["ts_ns"])
            if dt > window_ns:                       # y is long before x: no twin
                res["stock_only"] += 1
                j += 1
                continue
            # the nearest stock event in the window with the same sequence state
            best = None
            k = j
            while k < len(b) and int(b[k]["ts_ns"]) <= tx + window_ns:
                if all(x[f] == b[k][f] for f in same):
                    d = abs(tx - int(b[k]["ts_ns"]))
                    if best is None or d < best[1]:
                        best = (k, d)
                    elif d > best[1]:
                        break
                k += 1
            if best is None:
                res["hook_only"] += 1
                i += 1
                continue
            k, d = best
            res["stock_only"] += k - j
            y = b[k]
            res["paired"] += 1
            res["max_dt_us"] = max(res["max_dt_us"], d / 1e3)
            bad = [f for f in fields if x[f] != y[f]]
            if bad:
                res["mismatched"] += 1
                if len(res["examples"]) < 5:
                    res["examples"].append({f: [x[f], y[f]] for f in bad})
            i += 1
            j = k + 1
        res["hook_only"] += len(a) - i
        res["stock_only"] += len(b) - j
    return res


def compare_ss(hook: list[dict], samples: list[dict]) -> dict:
    """Each `ss` reading against the hook's events of that socket around it:
    the value ss read must lie within what the events of that moment show."""
    h = by_cookie(hook)
    res = {"samples": 0, "rto_ok": 0, "rttvar_ok": 0, "srtt_ok": 0, "examples": []}
    for smp in samples:
        evs = [e for e in h.get(smp["cookie"], [])
               if smp["t0"] - 5_000_000 <= int(e["ts_ns"]) <= smp["t1"] + 50_000_000]
        if len(evs) < 2:
            continue
        res["samples"] += 1
        for key, tol in (("rto_us", 0), ("rttvar_us", 1), ("srtt_us", 1)):
            vals = [int(e[key]) for e in evs]
            ok = min(vals) - tol <= smp[key] <= max(vals) + tol
            res[key.replace("_us", "_ok")] += ok
            if not ok and len(res["examples"]) < 5:
                res["examples"].append({"field": key, "ss": smp[key],
                                        "events": [min(vals), max(vals)]})
    return res


def kernel_hz() -> int:
    """The running kernel's HZ, from the kernel itself rather than from the
    hook: CONFIG_HZ in its config (/proc/config.gz, or /boot/config-RELEASE),
    else jiffies counted in /proc/timer_list over half a second against
    CLOCK_MONOTONIC, rounded to the nearest of the HZ choices Linux offers.
    (`getconf CLK_TCK` is USER_HZ, always 100, not HZ.)"""
    import gzip
    release = os.uname().release
    for path, opener in ((Path("/proc/config.gz"), gzip.open),
                         (Path(f"/boot/config-{release}"), open)):
        if path.exists():
            with opener(path, "rt") as f:
                found = re.search(r"^CONFIG_HZ=(\d+)$", f.read(), re.M)
            if found:
                return int(found.group(1))

    def jiffies() -> tuple[int, int]:
        text = Path("/proc/timer_list").read_text()
        return int(re.search(r"^jiffies: (\d+)$", text, re.M).group(1)), time.monotonic_ns()

    (j0, t0), _ = jiffies(), time.sleep(0.5)
    j1, t1 = jiffies()
    measured = (j1 - j0) * 1e9 / (t1 - t0)
    return min((100, 250, 300, 1000), key=lambda hz: abs(hz - measured))


def stock_rto_us(srtt_us: int, rto_var_us: int, hz: int) -> int:
    """The RTO Linux's tcp_set_rto() sets from srtt and rttvar_us, computed
    here: usecs_to_jiffies(srtt + rttvar) (rounded up), at most TCP_RTO_MAX
    (120 s), back in µs."""
    usec = 1_000_000 // hz
    return min(-(-(srtt_us + rto_var_us) // usec), 120 * hz) * usec


def stock_rto_matches(events: list[dict], hz: int) -> dict:
    """The events (rows of the record, numbers or their text) with an RTT
    estimate and no backoff, and those whose rto_us is the stock RTO of
    their own srtt_us and rto_var_us."""
    ev = [r for r in events if int(r["srtt_us"]) and not int(r["backoff"])]
    bad = [r for r in ev
           if int(r["rto_us"]) != stock_rto_us(int(r["srtt_us"]), int(r["rto_var_us"]), hz)]
    return {"events": len(ev), "same": len(ev) - len(bad),
            "examples": [{k: r[k] for k in ("srtt_us", "rto_var_us", "rto_us")} for r in bad[:5]]}


def loss_episodes(hook: list[dict], cookie: int) -> dict:
    evs = by_cookie(hook).get(cookie, [])
    loss = [e for e in evs if e["ca_state"] == "4"]
    return {"events": len(evs), "loss_events": len(loss),
            "max_backoff": max((int(e["backoff"]) for e in evs), default=0),
            "max_retransmits": max((int(e["retransmits"]) for e in evs), default=0),
            "total_retrans": max((int(e["total_retrans"]) for e in evs), default=0),
            "rto_max_us": max((int(e["rto_us"]) for e in evs), default=0)}


def run(out: Path, seconds: float = 8, blackhole_at: float = 4.5,
        blackhole_s: float = 1.5) -> dict:
    """The whole scenario; returns (and writes to out/result.json) its findings."""
    from tcpvar.capture import probe

    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"kernel": os.uname().release}
    samples: list[dict] = []
    with Dumbbell() as net, iperf_server(net):
        hook = probe.open_probe(out / "bpf", [PORT], prefer="bpf")
        stock = probe.open_probe(out / "tracefs", [PORT], prefer="tracefs")
        result["reason"] = hook.reason
        with hook, stock:
            client = iperf_client(net, seconds)
            t_start = time.monotonic()
            stop = threading.Event()

            def sampler():
                while not stop.is_set():
                    # not while the path is cut: timers move the state then
                    t = time.monotonic() - t_start
                    if 0.5 < t < blackhole_at - 0.3 or t > blackhole_at + blackhole_s + 1.5:
                        samples.extend(ss_sample(net))
                    stop.wait(0.25)

            th = threading.Thread(target=sampler)
            th.start()
            try:
                time.sleep(max(0.0, blackhole_at - (time.monotonic() - t_start)))
                blackhole(net, True)
                time.sleep(blackhole_s)
                blackhole(net, False)
                cl_out, cl_err = client.communicate(timeout=seconds + 60)
            finally:
                stop.set()
                th.join()
                if client.poll() is None:
                    client.kill()
                    client.wait()
        hstats, sstats = hook.stop(), stock.stop()
    result["hook"] = {"events": hstats.events, "lost": hstats.lost, **hstats.detail}
    result["stock"] = {"events": sstats.events, "lost": sstats.lost}
    try:
        iperf = json.loads(cl_out)
        result["iperf_bps"] = iperf["end"]["sum_sent"]["bits_per_second"]
        result["iperf_retransmits"] = iperf["end"]["sum_sent"].get("retransmits")
    except (ValueError, KeyError):
        result["iperf_error"] = (cl_err or cl_out)[-300:]
    hook_rows = read_csv(out / "bpf" / probe.CSV_NAME)
    stock_rows = read_csv(out / "tracefs" / probe.CSV_NAME)
    result["same_events"] = compare_sources(hook_rows, stock_rows)
    result["ss"] = compare_ss(hook_rows, samples)
    # the data connection: the sender's socket with the most events
    senders = [r for r in hook_rows if r["daddr"] == RCV_ADDR and r["dport"] == str(PORT)]
    counts: dict[int, int] = {}
    for r in senders:
        counts[int(r["cookie"])] = counts.get(int(r["cookie"]), 0) + 1
    data_cookie = max(counts, key=counts.get) if counts else 0
    result["data_cookie"] = data_cookie
    result["data_flow"] = {"saddr": SND_ADDR,
                           "sport": int(next((r["sport"] for r in senders
                                              if int(r["cookie"]) == data_cookie), 0)),
                           "daddr": RCV_ADDR, "dport": PORT}
    result["loss"] = loss_episodes(hook_rows, data_cookie)
    # the kernel's HZ, not the hook's: the hook's own figure is what is checked
    hz = kernel_hz()
    result["kernel_hz"] = hz
    result["stock_rto"] = stock_rto_matches(hook_rows, hz)
    # the kernel keeps the RTO in jiffies: in µs, whole jiffies of 1e6/HZ
    result["units"] = {"rto_us_whole_jiffies": all(int(r["rto_us"]) % (1_000_000 // hz) == 0
                                                   for r in hook_rows),
                       "rto_min_us": min((int(r["rto_us"]) for r in hook_rows), default=0)}
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    res = run(Path(sys.argv[1]))
    print(json.dumps(res))
