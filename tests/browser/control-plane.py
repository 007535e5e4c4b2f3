#!/usr/bin/python3
"""The Control Plane pages in a real browser (docs/control-plane.md).

Started by tests/integration/control-plane.sh with a sandbox (mock cloud, real
sshd nodes) in SANDBOX_DIR, its environment loaded. This script owns iscd: it
runs it with a minute-long tick while an experiment must stay `enqueued`, then
restarts it with a fast tick on the same loopback port so the page sees the
experiment go on to `completed`. Every check prints FAIL: on failure; the last
line is "control-plane: N passed, M failed". Screenshots of each page at a
laptop size go to $CONTROL_PLANE_SHOTS (default: a temp folder, printed).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webdriver import Driver, free_port  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ["ISC_BIN"]
SANDBOX = os.environ["SANDBOX_DIR"]
HOME = os.environ["ISC_HOME"]
LAUNCH = os.path.join(REPO, "tests", "integration", "launch")
WORK = tempfile.mkdtemp(prefix="isc-cp.", dir="/tmp")
SHOTS = os.environ.get("CONTROL_PLANE_SHOTS") or tempfile.mkdtemp(prefix="isc-cp-shots.", dir="/tmp")
os.makedirs(SHOTS, exist_ok=True)
XSS = "<img src=x onerror=alert(1)>"
# The mock S3 of the datasets (control-plane.sh starts it): only the dataset owner's keys.
DS_S3 = os.environ["CP_S3_URL"]
DS_KID = os.environ["CP_S3_KEY_ID"]
DS_SECRET = os.environ["CP_S3_SECRET"]

passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}{': ' + str(detail) if detail else ''}", flush=True)
    return ok


def isc(*args, token=None, input_text=None, user=None):
    """Runs isc: as the operator on the socket, or with a token over TCP."""
    env = dict(os.environ)
    cmd = [os.path.join(BIN, "isc")] + list(args)
    if token:
        env["ISC_API_URL"] = URL
        env["ISC_TOKEN"] = token
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, input=input_text, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"isc {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def isc_json(*args, token=None):
    return json.loads(isc(*args, "--json", token=token))


# ---- iscd, owned by this script ----
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
# Top-level keys go before the file's first [table] (the sandbox ends with providers).
with open(os.path.join(HOME, "config.toml")) as f:
    config = f.read()
with open(os.path.join(HOME, "config.toml"), "w") as f:
    f.write(f'api_listen = "127.0.0.1:{PORT}"\n' + config)
iscd = None


def start_iscd(interval_ms):
    global iscd
    log = open(os.path.join(WORK, "iscd.log"), "a")
    iscd = subprocess.Popen(["setpriv", "--pdeathsig", "TERM", os.path.join(BIN, "iscd"),
                             "--interval-ms", str(interval_ms)], stderr=log)
    tcp = os.path.join(HOME, "run", "api.sock.tcp")
    for _ in range(300):
        try:
            with urllib.request.urlopen(URL + "/index.html", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if iscd.poll() is not None:
            break
        time.sleep(0.1)
    with open(os.path.join(WORK, "iscd.log")) as f:
        tail = f.read()[-2000:]
    raise RuntimeError(f"iscd did not serve {URL} ({tcp}); its log ends:\n{tail}")


def stop_iscd():
    global iscd
    if iscd:
        iscd.terminate()
        try:
            iscd.wait(30)
        except subprocess.TimeoutExpired:
            iscd.kill()
            iscd.wait()
        iscd = None


def s3ctl(what, body):
    req = urllib.request.Request(f"{DS_S3}/_mock/{what}", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def http(path, token=None, method="GET", headers=None, data=None):
    """(status, headers, body) of a plain request to iscd's TCP listener."""
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(URL + path, method=method, headers=h, data=data)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


# ---- the platform: two organisations, a user of each role (OS users make their tokens) ----
tag = f"cp{os.getpid() % 100000}"
os_users = []


def os_user(role):
    name = f"{tag}-{role}"
    subprocess.run(["useradd", "-M", "-N", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", name],
                   check=True)
    os_users.append(name)
    return name


def token_of(user):
    """A token made by the user themself over the socket (the API's only way)."""
    env = {"ISC_HOME": HOME, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for k in ("LSAN_OPTIONS", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    r = subprocess.run(["runuser", "-u", user, "--", "env"] + [f"{k}={v}" for k, v in env.items()]
                       + [os.path.join(BIN, "isc"), "token", "create", "--expires", "2h"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"token create as {user}: {r.stderr.strip()}")
    return r.stdout.strip()


def launch_file(name, base, experiment_name=None):
    """A copy of a launch file of tests/integration/launch, optionally renamed."""
    with open(os.path.join(LAUNCH, base)) as f:
        text = f.read()
    if experiment_name is not None:
        text = re.sub(r'^experiment_name = .*$', 'experiment_name = ' + json.dumps(experiment_name),
                      text, flags=re.M)
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def launch(path, token):
    out = isc("burst", path, token=token)
    m = re.search(r"exp_[0-9a-f]{16}", out)
    if not m:
        raise RuntimeError("isc burst printed no id: " + out)
    return m.group(0)


def status_of(exp_id):
    return isc_json("status", exp_id)["status"]


def main():
    start_iscd(60000)  # a minute-long tick: what is launched now stays enqueued
    users = {r: os_user(r) for r in ("alice", "bob", "fin", "eve")}
    for u in users.values():
        isc("user", "add", u)
    isc("user", "add", f"{tag}-carol")
    isc("org", "add", "rival")
    isc("project", "add", "--org", "rival", "secret-project")
    isc("project", "add", "--org", "demo", "vision")
    isc("project", "budget", "--org", "demo", "--project", "vision", "250")
    isc("member", "add", "--org", "demo", users["alice"], "--role", "admin")
    isc("member", "add", "--org", "demo", users["bob"], "--role", "member")
    isc("member", "add", "--org", "demo", users["fin"], "--role", "finance")
    isc("member", "add", "--org", "rival", users["eve"], "--role", "admin")
    isc("credits", "grant", "--org", "rival", "100")
    s3ctl("bucket", {"bucket": "cp-data"})
    blob = os.path.join(WORK, "mnist.bin")
    with open(blob, "wb") as f:
        f.write(os.urandom(3 << 20))
    s3ctl("object", {"bucket": "cp-data", "key": "mnist.bin", "file": blob})
    tok = {r: token_of(u) for r, u in users.items()}

    d = Driver("/usr/bin/chromium", "/usr/bin/chromedriver", WORK)
    try:
        scenarios(d, tok, users)
    finally:
        d.quit()


def shot(d, name):
    d.screenshot(os.path.join(SHOTS, name + ".png"))


def sign_in(d, token):
    d.get(URL + "/index.html")
    d.js("sessionStorage.clear()")
    d.get(URL + "/index.html")
    d.wait_css("#token").type(token)
    d.find("#signin-button").click()
    return d.wait(lambda: d.url().endswith("/burst.html") and d.find("body[data-ready]"), 20)


def goto(d, page):
    d.get(URL + "/" + page)
    return d.wait_css("body[data-ready]", 20)


def texts(d, css):
    return [e.text() for e in d.find_all(css)]


def exp_row(d, exp_id):
    return d.find(f'#experiments tbody tr[data-id="{exp_id}"]')


def scenarios(d, tok, users):
    alice, bob = users["alice"], users["bob"]

    # ---- HTTP: headers, the folder, authority only from the header ----
    st, hdr, body = http("/")
    csp = hdr.get("Content-Security-Policy", "")
    check("/ serves the sign-in page", st == 200 and b"Sign in" in body, st)
    check("pages carry a strict CSP (scripts only from the origin, nothing inline)",
          "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp,
          csp)
    check("pages are not sniffed or framed", hdr.get("X-Content-Type-Options") == "nosniff"
          and "frame-ancestors 'none'" in csp)
    for bad in ("/%2e%2e/config.toml", "/..%2fconfig.toml", "/.%2e/.%2e/etc/passwd",
                "/app.js%00.html", "/index.html/", "/web/app.js", "/APP.JS", "/../../etc/passwd"):
        st, _, body = http(bad)
        check(f"static serving stays in its folder: {bad}", st == 404 and b"root:" not in body, st)
    st, _, _ = http("/v1/experiments")
    check("the API without a token: 401", st == 401, st)
    st, _, _ = http("/v1/members", method="POST", headers={"Cookie": "token=" + tok["alice"],
                                                          "Content-Type": "application/json"},
                    data=json.dumps({"org": "demo", "user": bob, "role": "admin"}).encode())
    check("a state change with a cookie but no Authorization header: 401", st == 401, st)

    # ---- sign-in ----
    d.get(URL + "/burst.html")
    check("a page without a token goes to sign-in",
          d.wait(lambda: d.url().endswith("/index.html"), 10), d.url())
    d.wait_css("#token").type("tok_0000000000000000." + "0" * 64)
    d.find("#signin-button").click()
    err = d.wait(lambda: d.find("#error:not([hidden])"), 10)
    check("a refused token says so on the sign-in page", err and "refused" in err.text())
    shot(d, "signin")
    check("alice signs in with her token", sign_in(d, tok["alice"]))
    check("the header names the user", d.find("#who").text() == alice)
    orgs = [o.text() for o in d.find_all("#org option")]
    check("the organisation picker offers alice's organisation only", orgs == ["demo"], orgs)
    check("the token is kept in sessionStorage (this tab)",
          d.js("return sessionStorage.getItem('isc.token')") == tok["alice"]
          and d.js("return localStorage.length") == 0 and d.js("return document.cookie") == "")

    # ---- Burst: find a shape, copy its id ----
    d.wait(lambda: d.find_all("#shapes tbody tr"), 20)
    d.find("#gpus").clear()
    d.find("#gpus").type("2")
    d.find("#provider").select("aws")
    d.find("#market").select("spot")
    d.find("#filters button[type=submit]").click()
    d.wait(lambda: "for 2 GPUs" in d.find("#status").text(), 20)
    rows = d.find_all("#shapes tbody tr")
    want = isc_json("shapes", "--gpus", "2", "--provider", "aws", "--market", "spot", "--limit", "100")
    ids = [r.attr("data-shape") for r in rows]
    check("Burst ranks the shapes as `isc shapes` does", ids == [s["id"] for s in want],
          (ids[:3], [s["id"] for s in want][:3]))
    first = rows[0]
    check("the cluster price is the API's", first.find("td:nth-child(9)").attr("data-micros")
          == str(want[0]["cluster_price_micros"]))
    check("each price shows its age", re.match(r"^\d+[smhd]", first.find("td:nth-child(10)").text()))
    # Ranking modes (issue 43): the page orders as `isc shapes --rank expected` does and
    # shows each shape's throughput and risk with their sources.
    d.find("#rank").select("expected")
    d.find("#filters button[type=submit]").click()
    want_e = isc_json("shapes", "--gpus", "2", "--provider", "aws", "--market", "spot",
                      "--rank", "expected", "--limit", "100")
    check("Burst ranks by expected cost as `isc shapes --rank expected` does", d.wait(lambda: [
        r.attr("data-shape") for r in d.find_all("#shapes tbody tr")] == [s["id"] for s in want_e], 20))
    first = d.find_all("#shapes tbody tr")[0]
    tput = first.find("td:nth-child(11)")
    check("each shape shows its throughput, the source in its title",
          tput.text() in ("unknown", "%.2f" % (want_e[0]["throughput"] or 0)) and
          tput.attr("title") == want_e[0]["throughput_source"], (tput.text(), tput.attr("title")))
    check("each shape shows what is known of the risk",
          first.find("td:nth-child(12)").text() != "", first.find("td:nth-child(12)").text())
    d.find("#rank").select("price")
    d.find("#provider").select("gcp")
    d.find("#filters button[type=submit]").click()
    check("the provider filter applies", d.wait(lambda: all(
        r.attr("data-shape").startswith("gcp-") for r in d.find_all("#shapes tbody tr"))
        and d.find_all("#shapes tbody tr"), 20))
    d.find("#provider").select("aws")
    d.find("#filters button[type=submit]").click()
    d.wait(lambda: d.find_all("#shapes tbody tr")[0].attr("data-shape") == want[0]["id"], 20)
    try:
        d.grant("clipboard-read")
        d.grant("clipboard-write")
    except Exception as e:  # the check below then fails with the reason
        print("note: permission grant:", e)
    d.find("#shapes tbody tr button.copy").click()
    check("the copy button says it copied the id",
          d.wait(lambda: d.find("#status").text() == "Copied " + want[0]["id"], 10),
          d.find("#status").text())
    clip = d.js_async("const done = arguments[0];"
                      "navigator.clipboard.readText().then(done, (e) => done('error: ' + e));")
    check("one click put the shape id on the clipboard", clip == want[0]["id"], clip)
    shot(d, "burst")

    # ---- Experiments: launched through isc, seen from enqueued to completed ----
    exp1 = launch(launch_file("two-node.isc", "two-node.isc"), tok["alice"])
    goto(d, "experiments.html")
    row = d.wait(lambda: exp_row(d, exp1), 20)
    check("the experiment launched through isc is listed", row)
    check("it shows enqueued while the broker has not ticked",
          row and row.attr("data-status") == "enqueued", row and row.attr("data-status"))
    d.find(f'button.open[data-id="{exp1}"]').click()
    d.wait(lambda: d.find("#d-status").text() == "enqueued", 10)
    shot(d, "experiments-enqueued")
    stop_iscd()
    start_iscd(200)  # now the broker runs: placing, provisioning, booting, running, completed
    seen = []

    def watch():
        r = exp_row(d, exp1)
        s = r.attr("data-status") if r else None
        if s and (not seen or seen[-1] != s):
            seen.append(s)
        return s == "completed"
    check("the Experiments page goes on to completed", d.wait(watch, 120, interval=0.2), seen)
    check("it saw the statuses in between", len(seen) >= 2 and seen[0] == "enqueued", seen)
    check("the detail's status follows", d.wait(lambda: d.find("#d-status").text() == "completed", 20))
    check("the events timeline lists the experiment's events",
          d.wait(lambda: len(d.find_all("#events li")) >= 3, 20), len(d.find_all("#events li")))
    log = d.wait(lambda: "RANK=0 NNODES=2" in d.find("#log").text() and d.find("#log").text(), 20)
    check("rank 0's log is shown", log, d.find("#log").text()[:200])
    check("the page shows rank 0's log, not rank 1's", log and "RANK=1" not in log)
    check("a final experiment offers no cancel", not d.find("#cancel").prop("hidden") is False)
    d.find("#mode").select("cycle")
    check("the compute mode filter hides a burst", d.wait(lambda: exp_row(d, exp1) is None, 5))
    d.find("#mode").select("burst")
    d.find("#state").select("completed")
    check("the status filter keeps a completed burst", d.wait(lambda: exp_row(d, exp1), 5))
    d.find("#state").select("failed")
    check("the status filter hides it under failed", d.wait(lambda: exp_row(d, exp1) is None, 5))
    d.find("#state").select("")
    d.find("#mode").select("")
    shot(d, "experiments")

    # ---- the log refreshes while it runs; cancel with a confirmation ----
    ticker = os.path.join(WORK, "ticker.isc")
    with open(ticker, "w") as f:
        f.write('isc_project_id = "demo"\nexperiment_name = "ticker"\ngpus = 2\n'
                'burst_shape_priority_list = ["aws-us-east-1-g4dn.xlarge-spot"]\n'
                "command = 'for i in $(seq 1 3000); do echo \"tick $i rank $RANK\"; sleep 0.05; done'\n")
    exp2 = launch(ticker, tok["alice"])
    row = d.wait(lambda: exp_row(d, exp2), 20)
    check("a second experiment appears without reloading the page", row)
    check("its row says who launched it and its project's name",
          row and row.find("td.launched-by").text() == alice and row.find("td.project").text() == "demo",
          row and (row.find("td.launched-by").text(), row.find("td.project").text()))
    d.wait(lambda: d.find(f'button.open[data-id="{exp2}"]'), 10).click()
    check("it runs", d.wait(lambda: d.find("#d-status").text() == "running", 90), d.find("#d-status").text())
    def last_tick():
        ticks = re.findall(r"^tick (\d+) rank 0$", d.find("#log").text(), re.M)
        return int(ticks[-1]) if ticks else 0
    t1 = d.wait(last_tick, 30)
    check("rank 0's output appears while it runs", t1, d.find("#log").text()[-200:])
    check("the log refreshes while it runs", d.wait(lambda: last_tick() > (t1 or 0) + 20, 30),
          (t1, last_tick()))
    d.wait(lambda: last_tick() > 150, 30)
    lines = [x for x in d.find("#log").text().split("\n") if x]
    check("only the last 100 lines are shown", len(lines) == 100 and
          lines[-1].startswith("tick ") and int(lines[0].split()[1]) >= last_tick() - 110,
          (len(lines), lines[:1], lines[-1:]))
    d.find("#cancel").click()
    check("cancel asks first", d.wait(lambda: d.find("#confirm").prop("open"), 5))
    check("the confirmation names the experiment", d.find("#c-id").text() == exp2)
    shot(d, "experiments-cancel")
    d.find("#c-no").click()
    time.sleep(2.5)
    check("declining the confirmation cancels nothing",
          status_of(exp2) == "running", status_of(exp2))
    d.find("#cancel").click()
    d.wait(lambda: d.find("#confirm").prop("open"), 5)
    d.find("#c-yes").click()
    check("the page asks iscd to cancel", d.wait(
        lambda: d.find("#status").text() == "Cancel requested for " + exp2, 10))
    check("the experiment is cancelled", d.wait(lambda: d.find("#d-status").text() == "cancelled", 90),
          d.find("#d-status").text())
    check("isc agrees", status_of(exp2) == "cancelled", status_of(exp2))
    st = isc_json("status", exp2)
    check("the broker's stop names who cancelled, in the reason and the timeline",
          st["status_reason"] == "cancelled by " + alice
          and any(e["message"] == "cancel requested by " + alice for e in st["events"]),
          (st["status_reason"], [e["message"] for e in st["events"] if "cancel" in e["kind"]]))
    check("the page's timeline says who asked",
          d.wait(lambda: ("cancel requested by " + alice) in d.find("#events").text(), 10))

    # ---- an experiment named like markup is text ----
    exp3 = launch(launch_file("xss.isc", "fails.isc", XSS), tok["alice"])
    row = d.wait(lambda: exp_row(d, exp3), 20)
    check("the markup-named experiment is listed", row)
    check("its name shows as text", row and row.find("td.name").text() == XSS,
          row and row.find("td.name").text())
    check("no <img> was made from it", d.js("return document.querySelectorAll('main img').length") == 0)
    d.find(f'button.open[data-id="{exp3}"]').click()
    check("the detail shows the name as text", d.wait(lambda: d.find("#d-name").text() == XSS, 10))
    time.sleep(1)
    check("no script ran from it (no alert)", d.alert_text() is None)

    # ---- Projects ----
    goto(d, "projects.html")
    projects = {p["name"]: p for p in isc_json("project", "list", "--org", "demo")}
    d.wait(lambda: len(d.find_all("#projects tbody tr")) == len(projects), 20)
    for name, p in projects.items():
        r = d.find(f'#projects tbody tr[data-project="{p["id"]}"]')
        check(f"project {name} is listed with its id to copy",
              r and r.find("button.copy").attr("data-copy") == p["id"])
    vision = d.find(f'#projects tbody tr[data-project="{projects["vision"]["id"]}"] td.num')
    check("the budget is shown", vision and vision.text() == "$250.000000", vision and vision.text())
    d.find("#budget-project").select("vision")
    d.find("#budget-amount").type("312.5")
    d.find("#budget button[type=submit]").click()
    check("an admin sets a budget from the page",
          d.wait(lambda: "312.50" in d.find("#status").text(), 10) and
          {p["name"]: p for p in isc_json("project", "list", "--org", "demo")}["vision"]
          ["budget_micros"] == 312500000)
    shot(d, "projects")

    # ---- Members ----
    goto(d, "members.html")
    d.wait(lambda: len(d.find_all("#members tbody tr")) >= 3, 20)
    listed = {r.attr("data-user"): r.attr("data-role") for r in d.find_all("#members tbody tr")}
    check("members are listed with their roles", listed.get(alice) == "admin" and
          listed.get(bob) == "member" and listed.get(users["fin"]) == "finance", listed)
    carol = f"{tag}-carol"
    d.find("#add-user").type(carol)
    d.find("#add-role").select("member")
    d.find("#add button[type=submit]").click()
    check("an admin adds a member", d.wait(lambda: d.find(f'#members tbody tr[data-user="{carol}"]'), 10))
    d.find(f'select[data-user="{carol}"]').select("finance")
    d.find(f'#members tbody tr[data-user="{carol}"] button.save').click()
    check("an admin changes a role", d.wait(lambda: (d.find(f'#members tbody tr[data-user="{carol}"]')
                                                     .attr("data-role")) == "finance", 10))
    roles = {m["user"]: m["role"] for m in isc_json("member", "list", "--org", "demo")}
    check("the API agrees on the role", roles.get(carol) == "finance", roles)
    shot(d, "members")
    d.find(f'#members tbody tr[data-user="{carol}"] button.remove').click()
    d.wait(lambda: d.find("#confirm").prop("open"), 5)
    d.find("#c-yes").click()
    check("an admin removes a member after confirming",
          d.wait(lambda: d.find(f'#members tbody tr[data-user="{carol}"]') is None, 10))
    check("the API agrees it is gone",
          carol not in {m["user"] for m in isc_json("member", "list", "--org", "demo")})

    # ---- Datasets, as an admin: add one from the page against the mock S3 ----
    goto(d, "datasets.html")
    check("Datasets is in every page's navigation",
          d.find('header nav a[href="datasets.html"]') is not None)
    check("an admin is offered the add form", d.wait(lambda: d.find("#admin").prop("hidden") is False, 10))
    # A slow S3 (each MiB of a GET waits) so the page is seen while the dataset caches.
    s3ctl("delay", {"ms": 400})
    d.find("#add-uri").type("s3://cp-data/mnist.bin")
    d.find("#add-name").type("cp-mnist")
    d.find("#add-akid").type(DS_KID)
    d.find("#add-secret").type(DS_SECRET)
    d.find("#add-submit").click()
    row_css = '#datasets tbody tr[data-dataset="cp-mnist"]'
    check("the dataset is added from the page",
          d.wait(lambda: "Added dataset cp-mnist" in d.find("#status").text(), 30),
          d.find("#status").text() + " / " + d.find("#error").text())
    check("the form does not keep the secret", d.find("#add-secret").prop("value") == "")
    seen = []

    def watch_ds():
        r = d.find(row_css)
        st = r.attr("data-state") if r else None
        if st and (not seen or seen[-1] != st):
            seen.append(st)
        return st == "Available"
    check("the page follows the dataset to Available without a reload", d.wait(watch_ds, 90), seen)
    check("it was seen Created or Caching first", seen and seen[0] in ("Created", "Caching"), seen)
    s3ctl("delay", {"ms": 0})
    shown = isc_json("datasets", "show", "cp-mnist", "--org", "demo")
    check("the API agrees: Available, on its own sealed keys", shown["state"] == "Available"
          and shown["credentials"].startswith("sealed:sha256:"), shown)
    check("the secret is nowhere on the page", DS_SECRET not in d.js("return document.documentElement.outerHTML"))
    r = d.find(row_css)
    check("the row shows the id to copy and full progress",
          r and r.find("button.copy").attr("data-copy") == shown["id"] and "100%" in r.text())
    d.find("#add-uri").type("s3://cp-data/mnist.bin")
    d.find("#add-name").type("cp-nokeys")
    d.find("#add-submit").click()
    time.sleep(1)
    check("an admin cannot send the form without the dataset's keys",
          d.find('#datasets tbody tr[data-dataset="cp-nokeys"]') is None
          and "cp-nokeys" not in isc("datasets", "list", "--org", "demo"))
    d.find("#add-uri").clear()
    d.find("#add-name").clear()
    shot(d, "datasets")
    ds_id = shown["id"]

    # ---- Spend, as finance: the chart's totals are the API's ----
    d.find("#signout").click()
    check("sign-out forgets the token", d.wait(lambda: d.url().endswith("/index.html"), 10)
          and d.js("return sessionStorage.getItem('isc.token')") is None)
    d.get(URL + "/experiments.html")
    check("after sign-out a page goes back to sign-in", d.wait(lambda: d.url().endswith("/index.html"), 10))
    check("finance signs in", sign_in(d, tok["fin"]))
    hidden = {a.attr("href"): a.prop("hidden") for a in d.find_all("header nav a")}
    check("finance is not offered Experiments or Members, is offered Spend",
          hidden.get("experiments.html") is True and hidden.get("members.html") is True
          and hidden.get("spend.html") is False, hidden)
    goto(d, "spend.html")
    api = json.loads(isc("spend", "--org", "demo", "--by", "project", "--format", "json"))
    d.wait(lambda: d.find("#spend tfoot tr.grand-total"), 30)
    check("there is spend to chart", api["total_micros"] > 0, api)
    bars = d.find_all("#chart rect.bar")
    check("the chart has bars", bars)
    by_project = {}
    for b in bars:
        by_project[b.attr("data-project")] = by_project.get(b.attr("data-project"), 0) + int(b.attr("data-micros"))
    want_by = {r["key"]: r["amount_micros"] for r in api["rows"]}
    check("the chart's bars sum to the API's total per project", by_project == want_by,
          (by_project, want_by))
    gt = d.find("#spend tfoot tr.grand-total td.num")
    check("the table's total is the API's, to the micro-dollar",
          gt.text() == "$" + api["total"] and gt.attr("data-micros") == str(api["total_micros"]),
          (gt.text(), api["total"]))
    day_rows = sum(int(td.attr("data-micros")) for td in d.find_all("#spend tbody td.num"))
    check("the table's day rows add up to the total", day_rows == api["total_micros"])
    shot(d, "spend")
    d.find("#csv").click()
    # The file can be there before its bytes are (Chromium creates it, then writes): wait
    # for the whole of it, which ends with the last row's CRLF.
    def whole_csvs():
        out = []
        for f in os.listdir(d.downloads):
            p = os.path.join(d.downloads, f)
            try:
                with open(p, "rb") as fh:
                    if f.endswith(".csv") and fh.read().endswith(b"\r\n"):
                        out.append(p)
            except OSError:
                pass
        return out
    csv_path = d.wait(whole_csvs, 15)
    if check("the CSV downloads", csv_path):
        with open(csv_path[0], newline="") as f:
            rows = f.read().strip().split("\r\n")
        total = sum(int(r.split(",")[-1]) for r in rows[1:])
        check("the CSV's rows add up to the API's total", rows[0].startswith("day,project")
              and total == api["total_micros"], (rows[:2], total))
    goto(d, "experiments.html")
    time.sleep(2.5)
    check("finance sees no experiment (the API lists none to finance)",
          not d.find_all("#experiments tbody tr"), len(d.find_all("#experiments tbody tr")))

    # ---- a member: own experiments only, no members, no spend ----
    check("bob (member) signs in", sign_in(d, tok["bob"]))
    goto(d, "experiments.html")
    time.sleep(2.5)
    check("a member sees none of another member's experiments",
          not d.find_all("#experiments tbody tr"), len(d.find_all("#experiments tbody tr")))
    goto(d, "members.html")
    err = d.wait(lambda: d.find("#error:not([hidden])"), 10)
    check("a member's Members page is refused by the API (403)",
          err and "role" in err.text() and not d.find_all("#members tbody tr"), err and err.text())
    goto(d, "spend.html")
    err = d.wait(lambda: d.find("#error:not([hidden])"), 10)
    check("a member's Spend page is refused, no chart", err and not d.find("#chart"))
    check("...and nothing under the refusal (no filters, no table)",
          d.find("#report") is not None and d.find("#report").prop("hidden") is True)
    goto(d, "datasets.html")
    check("a member sees the organisation's datasets",
          d.wait(lambda: d.find('#datasets tbody tr[data-dataset="cp-mnist"]'), 10))
    check("a member gets no add form and no remove button",
          d.find("#admin").prop("hidden") is True and not d.find_all("#datasets button.remove"))
    shot(d, "datasets-member")
    st, _, body = http("/v1/datasets", token=tok["bob"], method="POST",
                       headers={"Content-Type": "application/json"},
                       data=json.dumps({"org": "demo", "uri": "s3://cp-data/mnist.bin", "name": "by-bob",
                                        "credentials": {"access_key_id": DS_KID,
                                                        "secret_access_key": DS_SECRET}}).encode())
    check("a member's add is refused by the API (403)", st == 403, (st, body))
    st, _, _ = http(f"/v1/datasets/{ds_id}", token=tok["bob"], method="DELETE")
    check("a member's remove is refused by the API (403)", st == 403, st)

    # ---- a member of another organisation: none of it is visible ----
    check("eve (admin of rival) signs in", sign_in(d, tok["eve"]))
    orgs = [o.text() for o in d.find_all("#org option")]
    check("eve's picker shows only rival", orgs == ["rival"], orgs)
    goto(d, "experiments.html")
    time.sleep(2.5)
    check("eve sees no experiment of demo", not d.find_all("#experiments tbody tr"))
    page_text = d.js("return document.body.innerText")
    check("nothing of demo's experiments is on eve's page",
          exp1 not in page_text and exp2 not in page_text and XSS not in page_text)
    goto(d, "projects.html")
    d.wait(lambda: d.find_all("#projects tbody tr"), 10)
    shown = d.js("return document.body.innerText")
    check("eve's projects are rival's only", "secret-project" in shown and
          projects["vision"]["id"] not in shown and projects["demo"]["id"] not in shown)
    goto(d, "members.html")
    d.wait(lambda: d.find_all("#members tbody tr"), 10)
    check("eve's members are rival's only",
          [r.attr("data-user") for r in d.find_all("#members tbody tr")] == [users["eve"]])
    # The picker is only a convenience: choosing demo by hand gets the API's 404.
    d.js("sessionStorage.setItem('isc.org', 'demo')")
    d.get(URL + "/projects.html")
    d.wait_css("body[data-ready]")
    check("a hand-picked other org falls back to eve's own", d.find("#org").prop("value") == "rival")
    st, _, body = http("/v1/projects?org=demo", token=tok["eve"])
    check("the API answers eve 404 for demo's projects", st == 404, st)
    st, _, _ = http(f"/v1/experiments/{exp1}", token=tok["eve"])
    check("and 404 for demo's experiment", st == 404, st)
    st, _, _ = http(f"/v1/experiments/{exp2}/cancel", token=tok["eve"], method="POST")
    check("and 404 for cancelling it", st == 404, st)
    goto(d, "spend.html")
    d.wait(lambda: d.find("#spend tfoot tr.grand-total") or d.find("#error:not([hidden])"), 20)
    check("eve's spend has nothing of demo", "vision" not in d.js("return document.body.innerText"))
    goto(d, "datasets.html")
    time.sleep(1.5)
    check("eve sees none of demo's datasets", not d.find_all("#datasets tbody tr")
          and "cp-mnist" not in d.js("return document.body.innerText"))
    st, _, _ = http(f"/v1/datasets/{ds_id}", token=tok["eve"])
    check("the API answers eve 404 for demo's dataset", st == 404, st)
    st, _, _ = http("/v1/datasets?org=demo", token=tok["eve"])
    check("and 404 for demo's list", st == 404, st)
    st, _, _ = http("/v1/datasets", token=tok["eve"], method="POST",
                    headers={"Content-Type": "application/json"},
                    data=json.dumps({"org": "demo", "uri": "s3://cp-data/mnist.bin", "name": "by-eve",
                                     "credentials": {"access_key_id": DS_KID,
                                                     "secret_access_key": DS_SECRET}}).encode())
    check("and 404 for adding one to demo", st == 404, st)
    check("no alert was ever raised", d.alert_text() is None)


if __name__ == "__main__":
    rc = 0
    try:
        main()
    except Exception as e:  # a broken setup is a failure, with its reason
        import traceback
        traceback.print_exc()
        check("the browser suite ran to its end", False, e)
    finally:
        stop_iscd()
        for u in os_users:
            subprocess.run(["userdel", u], capture_output=True)
        if os.environ.get("KEEP") != "1":
            subprocess.run(["rm", "-rf", WORK])
    print(f"screenshots: {SHOTS}")
    print(f"control-plane: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
