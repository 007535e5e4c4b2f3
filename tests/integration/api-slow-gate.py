"""A gate on the path from iscd to the mock cloud, for tests/integration/api-slow.sh.

A TCP relay on a loopback port to UPSTREAM (the mock cloud). While the file
STATE/closed exists, every request that arrives from iscd is held before it
reaches the mock: a cloud that does not answer yet, for as long as the test
wants, so the test can assert on what iscd answers meanwhile without guessing
a duration. Each held request adds one to STATE/held (a number, rewritten);
removing STATE/closed lets every held request through, in the order it came.

Usage: api-slow-gate.py --port-file F --upstream http://127.0.0.1:PORT --state DIR
"""
import argparse
import os
import socket
import threading
import time
import urllib.parse

lock = threading.Lock()
held = 0


def closed(state):
    return os.path.exists(os.path.join(state, "closed"))


def count_held(state):
    global held
    with lock:
        held += 1
        tmp = os.path.join(state, "held.tmp")
        with open(tmp, "w") as f:
            f.write("%d\n" % held)
        os.replace(tmp, os.path.join(state, "held"))


def pump_up(client, upstream, state):
    """iscd -> mock: each chunk that starts a request waits while the gate is closed."""
    try:
        while True:
            data = client.recv(65536)
            if not data:
                break
            if closed(state):
                count_held(state)
                while closed(state):
                    time.sleep(0.02)
            upstream.sendall(data)
    except OSError:
        pass
    finally:
        try:
            upstream.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def pump_down(upstream, client):
    try:
        while True:
            data = upstream.recv(65536)
            if not data:
                break
            client.sendall(data)
    except OSError:
        pass
    finally:
        for s in (client, upstream):
            try:
                s.close()
            except OSError:
                pass


def serve(client, host, port, state):
    try:
        upstream = socket.create_connection((host, port))
    except OSError:
        client.close()
        return
    threading.Thread(target=pump_up, args=(client, upstream, state), daemon=True).start()
    pump_down(upstream, client)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--state", required=True)
    a = ap.parse_args()
    up = urllib.parse.urlparse(a.upstream)
    if up.hostname not in ("127.0.0.1", "localhost") and not up.hostname.startswith("127."):
        raise SystemExit("api-slow-gate: the upstream must be on loopback")
    os.makedirs(a.state, exist_ok=True)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.replace(tmp, a.port_file)
    while True:
        client, _ = ls.accept()
        threading.Thread(target=serve, args=(client, up.hostname, up.port, a.state),
                         daemon=True).start()


if __name__ == "__main__":
    main()
