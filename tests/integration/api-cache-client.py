"""One keep-alive HTTP connection for tests/integration/api-cache.sh: iscd's thread pool
keeps a connection on one server thread, so the requests below all meet the same
thread's caches (api/server.c). Each argument is a step:
  GET:PATH   a request with the bearer token of $TOKEN; prints its status on a line
  RUN:CMD    runs CMD with bash between two requests (it changes the store)
Usage: api-cache-client.py URL STEP...
"""
import http.client
import os
import subprocess
import sys
import urllib.parse

url = urllib.parse.urlsplit(sys.argv[1])
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
headers = {"Authorization": "Bearer " + os.environ["TOKEN"]}
for step in sys.argv[2:]:
    kind, _, arg = step.partition(":")
    if kind == "GET":
        conn.request("GET", arg, headers=headers)
        resp = conn.getresponse()
        resp.read()
        print(resp.status, flush=True)
        if resp.getheader("Connection", "").lower() == "close":
            sys.exit("the server closed the connection: the steps would change threads")
    elif kind == "RUN":
        if subprocess.run(["bash", "-c", arg]).returncode != 0:
            sys.exit("step failed: " + arg)
    else:
        sys.exit("unknown step " + step)
