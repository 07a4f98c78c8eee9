"""Finite transfers, both ends: the short flows beside the long ones
(`--short RATE:SIZE`: transfers of SIZE bytes arriving as a Poisson
process of RATE a second, each a new TCP connection from the first flow's
sender to its receiver, through the bottleneck) and the finite flows
(`--size`: one transfer on the flow's own hosts and ports). iperf3
cannot carry them: a client of `-n` bytes ends its test when its last
byte is written, and its server resets the connection with the rest
unread.

The client connects, sends its bytes, shuts its side down and waits for the
server's close, which comes once the server has read every byte: the
transfer is then complete. It writes a line of JSON per transfer as it
ends (short.jsonl, flow-N.jsonl). The flow completion time the store keeps is the
capture's (SYN to the ACK of the last byte, analyzers/shortflows.py); the
client's own clock (connect() to the server's close) is kept beside it.

Run as `python -m tcpvar.capture.shortflows server|client ...` in the
testbed's namespaces: one process of each, a selector over every
connection, stdlib only (the micro-VM reads each module it imports over
its share)."""
from __future__ import annotations

import argparse
import errno
import json
import random
import selectors
import signal
import socket
import sys
import time
from collections import deque
from pathlib import Path

CHUNK = 256 * 1024
MAX_SHORT_FLOWS = 20_000        # a run's transfers, over every class
MAX_SIZE = 1 << 30


def plan(classes: list[dict], duration_s: float, seed: int) -> list[tuple[float, int]]:
    """The arrivals of @classes ({"per_s", "bytes"}) over @duration_s, each
    class a Poisson process drawn from @seed: (t_s, bytes) in time order,
    at most MAX_SHORT_FLOWS."""
    rng = random.Random(f"short-{seed}")
    out = []
    for c in classes:
        t = rng.expovariate(c["per_s"])
        while t < duration_s and len(out) < MAX_SHORT_FLOWS:
            out.append((round(t, 6), c["bytes"]))
            t += rng.expovariate(c["per_s"])
    return sorted(out)[:MAX_SHORT_FLOWS]


class _Transfer:
    def __init__(self, i: int, planned_s: float, size: int) -> None:
        self.i, self.planned_s, self.size = i, planned_s, size
        self.sent = 0
        self.start_ns = self.connected_ns = self.end_ns = None
        self.sport = None
        self.state = "connecting"
        self.error: str | None = None
        self.sock: socket.socket | None = None

    def record(self, outcome: str, error: str | None = None) -> dict:
        return {"id": self.i, "planned_s": self.planned_s, "bytes": self.size,
                "start_ns": self.start_ns, "connected_ns": self.connected_ns,
                "end_ns": self.end_ns, "sport": self.sport, "sent": self.sent,
                "outcome": outcome, "error": error}


_stop = False
TICK_S = 0.1                    # how soon SIGINT is seen


def _on_signal(signum, frame):
    global _stop
    _stop = True


def run_client(dst: str, port: int, cc: str, origin_ns: int, deadline_ns: int,
               arrivals: list[tuple[float, int]], out, sport: int | None = None) -> None:
    """Each planned transfer at origin + its time, until every one has
    ended or the deadline (or SIGINT) cuts those still running; from port
    @sport (a finite flow's, whose ports the captures and tcp_probe know)."""
    sel = selectors.DefaultSelector()
    pending = deque(_Transfer(i, t, n) for i, (t, n) in enumerate(arrivals, start=1))
    live: dict[int, _Transfer] = {}
    payload = memoryview(bytes(CHUNK))

    def finish(tr: _Transfer, outcome: str, error: str | None = None) -> None:
        if tr.sock is not None:
            sel.unregister(tr.sock)
            tr.sock.close()
        live.pop(tr.i, None)
        out.write(json.dumps(tr.record(outcome, error)) + "\n")
        out.flush()

    while (pending or live) and not _stop:
        now = time.time_ns()
        if now >= deadline_ns:
            break
        while pending and origin_ns + pending[0].planned_s * 1e9 <= now:
            tr = pending.popleft()
            _connect(tr, dst, port, cc, sel, sport)
            if tr.state == "failed":
                finish(tr, "failed", tr.error)
            else:
                live[tr.i] = tr
        wake = deadline_ns if not pending else min(
            deadline_ns, origin_ns + int(pending[0].planned_s * 1e9))
        for key, _ in sel.select(min(TICK_S, max(0.0, (wake - time.time_ns()) / 1e9))):
            _step(key.data, sel, payload, finish)
    for tr in list(live.values()):
        finish(tr, "never connected" if tr.state == "connecting" else "cut")


def _connect(tr: _Transfer, dst: str, port: int, cc: str, sel, sport: int | None) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        if sport:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("", sport))
        sock.setblocking(False)
        tr.start_ns = time.time_ns()
        err = sock.connect_ex((dst, port))
        if err not in (0, errno.EINPROGRESS):
            raise OSError(err, errno.errorcode.get(err, str(err)))
        tr.sport = sock.getsockname()[1]
    except OSError as exc:
        sock.close()
        tr.state, tr.error = "failed", str(exc)
        return
    tr.sock = sock
    sel.register(sock, selectors.EVENT_WRITE, tr)


def _step(tr: _Transfer, sel, payload: memoryview, finish) -> None:
    """One ready socket: connected, writable or the server's close."""
    sock = tr.sock
    if tr.state == "connecting":
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            finish(tr, "failed", errno.errorcode.get(err, str(err)))
            return
        tr.connected_ns, tr.state = time.time_ns(), "sending"
    if tr.state == "sending":
        try:
            tr.sent += sock.send(payload[:min(CHUNK, tr.size - tr.sent)])
        except BlockingIOError:
            return
        except OSError as exc:
            finish(tr, "failed", str(exc))
            return
        if tr.sent == tr.size:
            sock.shutdown(socket.SHUT_WR)
            tr.state = "closing"
            sel.modify(sock, selectors.EVENT_READ, tr)
        return
    try:
        data = sock.recv(4096)
    except OSError as exc:
        finish(tr, "failed", str(exc))
        return
    if not data:                    # the server read every byte and closed
        tr.end_ns = time.time_ns()
        finish(tr, "complete")


def run_server(addr: str, port: int) -> None:
    """Read every connection to its end, then close it, until SIGINT."""
    sel = selectors.DefaultSelector()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((addr, port))
    lsock.listen(4096)
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ, None)
    while not _stop:
        for key, _ in sel.select(TICK_S):
            if key.data is None:
                try:
                    conn, _ = lsock.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, conn)
                continue
            try:
                data = key.data.recv(CHUNK)
            except OSError:
                data = b""
            if not data:
                sel.unregister(key.data)
                key.data.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tcpvar.capture.shortflows")
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--addr", required=True)
    s.add_argument("--port", type=int, required=True)
    c = sub.add_parser("client")
    c.add_argument("--dst", required=True)
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--cc", required=True)
    c.add_argument("--sport", type=int)
    c.add_argument("--origin-ns", type=int, required=True)
    c.add_argument("--deadline-ns", type=int, required=True)
    c.add_argument("--plan", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if a.role == "server":
        run_server(a.addr, a.port)
        return 0
    arrivals = [(float(t), int(n)) for t, n in json.loads(a.plan.read_text())]
    with open(a.out, "w") as out:
        run_client(a.dst, a.port, a.cc, a.origin_ns, a.deadline_ns, arrivals, out, a.sport)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
