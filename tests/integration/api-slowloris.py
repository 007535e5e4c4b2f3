"""Slow clients of iscd's TCP listener, for tests/integration/api-slowloris.sh.

flood: many connections, each from one of ADDRS loopback source addresses
  (127.77.X.Y; loopback holds the whole 127/8), each sending a request line and
  then one header line every TRICKLE seconds, never the blank line that ends the
  headers: a slowloris. With --reconnect a connection the server closed is opened
  again after a moment, as an attacker would. Every second (and at the end) it
  writes REPORT (JSON): how many it holds, how many were closed by the server,
  how long the longest- and the shortest-lived of them lived, and how many were
  closed within one second of opening (refused).

probe: COUNT authenticated requests from 127.0.0.1, one every INTERVAL seconds,
  each on a new connection; OUT (JSON) gets each one's status and seconds to the
  whole reply (None: no reply within 10 s).

slowbody: one POST whose headers arrive at once and whose body arrives one byte
  every TRICKLE seconds; OUT gets the status (None: the server closed without
  one) and the seconds it took.

Only loopback addresses are used.
"""
import argparse
import json
import os
import selectors
import signal
import socket
import time


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def source(i, first):
    n = first + i
    return "127.77.%d.%d" % (n // 250, 1 + n % 250)


class Slow:
    def __init__(self, addr):
        self.addr = addr
        self.sock = None
        self.opened = 0.0
        self.next_line = 0.0
        self.lines = 0
        self.reopen_at = 0.0


def flood(a):
    sel = selectors.DefaultSelector()
    conns = [Slow(source(i // a.per_addr, a.first_addr)) for i in range(a.addrs * a.per_addr)]
    stats = {"held": 0, "opened": 0, "closed_by_server": 0, "refused_within_1s": 0,
             "max_life_s": 0.0, "min_life_s": None, "lines_sent": 0, "connect_errors": 0}
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))

    def open_one(c, now):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((c.addr, 0))
            s.connect_ex(("127.0.0.1", a.port))
        except OSError:
            stats["connect_errors"] += 1
            s.close()
            c.reopen_at = now + 0.5
            return
        c.sock = s
        c.opened = now
        c.next_line = now  # the request line at once
        c.lines = 0
        sel.register(s, selectors.EVENT_READ, c)
        stats["opened"] += 1

    def closed(c, now):
        life = now - c.opened
        sel.unregister(c.sock)
        c.sock.close()
        c.sock = None
        stats["closed_by_server"] += 1
        if life < 1.0:
            stats["refused_within_1s"] += 1
        stats["max_life_s"] = max(stats["max_life_s"], round(life, 3))
        if stats["min_life_s"] is None or life < stats["min_life_s"]:
            stats["min_life_s"] = round(life, 3)
        c.reopen_at = now + 0.5 if a.reconnect else float("inf")

    start = time.monotonic()
    for c in conns:
        open_one(c, start)
    last_report = 0.0
    while not stop["now"] and time.monotonic() - start < a.duration:
        now = time.monotonic()
        for key, _ in sel.select(timeout=0.05):
            c = key.data
            try:
                data = c.sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                closed(c, time.monotonic())
        now = time.monotonic()
        for c in conns:
            if c.sock is None:
                if now >= c.reopen_at:
                    open_one(c, now)
                continue
            if now < c.next_line:
                continue
            line = (b"GET /v1/whoami HTTP/1.1\r\nHost: iscd\r\n" if c.lines == 0
                    else b"X-Slow-%d: %d\r\n" % (c.lines, c.lines))
            try:
                c.sock.send(line)
                c.lines += 1
                stats["lines_sent"] += 1
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                closed(c, now)
                continue
            c.next_line = now + a.trickle
        stats["held"] = sum(1 for c in conns if c.sock is not None)
        if now - last_report >= 1.0:
            write_json(a.report, stats)
            last_report = now
    stats["held"] = sum(1 for c in conns if c.sock is not None)
    write_json(a.report, stats)


def read_reply(s, deadline):
    """The status of one HTTP reply on s, after reading its whole body; None if closed."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = s.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(body) < length:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = s.recv(65536)
        if not chunk:
            return None
        body += chunk
    return status


def probe(a):
    results = []
    for i in range(a.count):
        t0 = time.monotonic()
        status = None
        try:
            s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
            s.sendall(b"GET /v1/whoami HTTP/1.1\r\nHost: iscd\r\nAuthorization: Bearer "
                      + a.token.encode() + b"\r\nConnection: close\r\n\r\n")
            status = read_reply(s, t0 + 10)
            s.close()
        except OSError as e:
            status = "error: %s" % e
        results.append({"status": status, "seconds": round(time.monotonic() - t0, 3)})
        write_json(a.out, results)
        if i + 1 < a.count:
            time.sleep(a.interval)


def slowbody(a):
    body = b'{"name": "%s"}' % a.org.encode()
    head = b"POST /v1/orgs HTTP/1.1\r\nHost: iscd\r\nContent-Type: application/json\r\n"
    if a.token:
        head += b"Authorization: Bearer " + a.token.encode() + b"\r\n"
    head += b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    t0 = time.monotonic()
    status = None
    try:
        s = socket.create_connection(("127.0.0.1", a.port), timeout=30)
        s.sendall(head)
        # All but the last byte, one every TRICKLE seconds, then the last at once.
        steps = max(1, int(a.total / a.trickle))
        for i in range(min(steps, len(body) - 1)):
            s.sendall(body[i:i + 1])
            time.sleep(a.trickle)
        s.sendall(body[min(steps, len(body) - 1):])
        status = read_reply(s, time.monotonic() + 20)
        s.close()
    except OSError:
        status = None
    write_json(a.out, {"status": status, "seconds": round(time.monotonic() - t0, 3)})


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    f = sub.add_parser("flood")
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--addrs", type=int, required=True)
    f.add_argument("--first-addr", type=int, default=0)
    f.add_argument("--per-addr", type=int, required=True)
    f.add_argument("--trickle", type=float, default=1.0)
    f.add_argument("--duration", type=float, default=120)
    f.add_argument("--reconnect", action="store_true")
    f.add_argument("--report", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--count", type=int, default=5)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--out", required=True)
    b = sub.add_parser("slowbody")
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--token", default="")
    b.add_argument("--org", required=True)
    b.add_argument("--trickle", type=float, default=0.5)
    b.add_argument("--total", type=float, default=6.0)
    b.add_argument("--out", required=True)
    a = ap.parse_args()
    {"flood": flood, "probe": probe, "slowbody": slowbody}[a.mode](a)


if __name__ == "__main__":
    main()
