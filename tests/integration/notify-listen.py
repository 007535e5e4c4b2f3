#!/usr/bin/python3
"""The service manager's end of the notify protocol (sd_notify(3)), for package.sh.

Binds a datagram socket at SOCKET_PATH (what NOTIFY_SOCKET names) and appends each
message iscd sends to LOG, one line each, "<seconds since start> <message with
newlines as |>". When a message says READY=1 it asks the API at that very moment
(GET /v1/whoami on API_SOCKET, as iscd's own probe does) and logs "api-at-ready
200" (or what went wrong): READY=1 promises the API answers. Exits on SIGTERM.
"""
import signal
import socket
import sys
import time

sock_path, log_path, api_path = sys.argv[1], sys.argv[2], sys.argv[3]
start = time.monotonic()
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sock_path)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


def api_status():
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(5)
        c.connect(api_path)
        c.sendall(b"GET /v1/whoami HTTP/1.0\r\nHost: localhost\r\n\r\n")
        line = c.recv(64).split(b"\r\n", 1)[0].decode()
        c.close()
        return line.split(" ")[1] if line.startswith("HTTP/1.") else "bad-reply:" + line
    except OSError as e:
        return "error:" + type(e).__name__


with open(log_path, "a", buffering=1) as log:
    log.write("listening\n")
    while True:
        msg = s.recv(4096).decode(errors="replace")
        log.write("%.3f %s\n" % (time.monotonic() - start, msg.replace("\n", "|")))
        if "READY=1" in msg.split("\n"):
            log.write("api-at-ready %s\n" % api_status())
