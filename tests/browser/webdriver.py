"""A small client of the W3C WebDriver HTTP protocol (chromedriver), on urllib.

The browser tests drive Debian's chromium through Debian's chromedriver; nothing
here downloads a browser or a driver. Only loopback addresses are used.
"""
import base64
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class WebDriverError(Exception):
    def __init__(self, status, error, message):
        super().__init__(f"{status} {error}: {message}")
        self.error = error


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Driver:
    """chromedriver on a loopback port, one headless chromium session."""

    def __init__(self, chromium, chromedriver, workdir, width=1440, height=900):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(workdir, "chromedriver.log"), "w")
        self.proc = subprocess.Popen(
            [chromedriver, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except (OSError, WebDriverError):
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("chromedriver did not start (see chromedriver.log)")
                time.sleep(0.1)
        self.downloads = os.path.join(workdir, "downloads")
        os.makedirs(self.downloads, exist_ok=True)
        args = [
            "--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--disable-dev-shm-usage",
            "--metrics-recording-only", "--no-pings", "--password-store=basic",
            # Loopback only: every host name fails to resolve except the literal addresses used.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--window-size={width},{height}",
            f"--user-data-dir={os.path.join(workdir, 'profile')}",
        ]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # chromium refuses its sandbox as root
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {
                "binary": chromium, "args": args,
                "prefs": {"download.default_directory": self.downloads,
                          "download.prompt_for_download": False},
            },
        }}}
        self.sid = self._call("POST", "/session", caps)["sessionId"]
        self.s = f"/session/{self.sid}"
        self._call("POST", self.s + "/window/rect", {"width": width, "height": height})
        self._call("POST", self.s + "/timeouts", {"script": 15000, "implicit": 0})

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                payload = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            payload = json.loads(e.read() or b"{}")
            v = payload.get("value", {})
            raise WebDriverError(e.code, v.get("error"), v.get("message", "")[:300])
        return payload.get("value")

    def quit(self):
        try:
            self._call("DELETE", self.s)
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()

    # ---- navigation and script ----
    def get(self, url):
        self._call("POST", self.s + "/url", {"url": url})

    def url(self):
        return self._call("GET", self.s + "/url")

    def js(self, script, *args):
        return self._call("POST", self.s + "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args):
        return self._call("POST", self.s + "/execute/async", {"script": script, "args": list(args)})

    def grant(self, name):
        """Grants a permission (clipboard-read) through chromedriver's Set Permission."""
        self._call("POST", self.s + "/permissions",
                   {"descriptor": {"name": name}, "state": "granted"})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self._call("GET", self.s + "/screenshot")))

    def alert_text(self):
        """The open dialog's text, None when none is open."""
        try:
            return self._call("GET", self.s + "/alert/text")
        except WebDriverError as e:
            if e.error == "no such alert":
                return None
            raise

    # ---- elements ----
    def find_all(self, css):
        found = self._call("POST", self.s + "/elements", {"using": "css selector", "value": css})
        return [Element(self, f[ELEMENT]) for f in found]

    def find(self, css):
        found = self.find_all(css)
        return found[0] if found else None

    def wait(self, cond, timeout=20, what="condition", interval=0.1):
        """Polls cond() until it is truthy; returns its value, or None after timeout."""
        deadline = time.time() + timeout
        while True:
            try:
                v = cond()
            except (WebDriverError, AttributeError):
                # A page that re-renders a table can be polled between removing a row and
                # adding it back: find() gives None then, and None.text() is "not yet".
                v = None
            if v:
                return v
            if time.time() > deadline:
                return None
            time.sleep(interval)

    def wait_css(self, css, timeout=20):
        return self.wait(lambda: self.find(css), timeout)


class Element:
    def __init__(self, d, eid):
        self.d, self.eid = d, eid
        self.p = f"{d.s}/element/{eid}"

    def click(self):
        self.d._call("POST", self.p + "/click", {})

    def clear(self):
        self.d._call("POST", self.p + "/clear", {})

    def type(self, text):
        self.d._call("POST", self.p + "/value", {"text": text})

    def text(self):
        return self.d._call("GET", self.p + "/text")

    def attr(self, name):
        return self.d._call("GET", self.p + "/attribute/" + name)

    def prop(self, name):
        return self.d._call("GET", self.p + "/property/" + name)

    def find_all(self, css):
        found = self.d._call("POST", self.p + "/elements", {"using": "css selector", "value": css})
        return [Element(self.d, f[ELEMENT]) for f in found]

    def find(self, css):
        found = self.find_all(css)
        return found[0] if found else None

    def select(self, value):
        """Sets a <select> to value and fires change, as a person choosing it would."""
        self.d.js("arguments[0].value = arguments[1];"
                  "arguments[0].dispatchEvent(new Event('change', {bubbles: true}));",
                  {ELEMENT: self.eid}, value)

    def ref(self):
        return {ELEMENT: self.eid}
