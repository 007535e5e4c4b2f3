"""The mock cloud's state: instances, reservations, client tokens, key pairs, spot
requests, spot prices, faults, call counters; the instance state machine and the
real sshd nodes behind running instances."""

import hashlib
import heapq
import itertools
import json
import os
import secrets
import subprocess
import sys
import threading
import time

STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48,
               "stopping": 64, "stopped": 80}

# Rough spot prices (USD/hour) of common GPU types; other types get a hash-derived price.
BASE_PRICES = {
    "p5.48xlarge": 29.50, "p4de.24xlarge": 12.00, "p4d.24xlarge": 9.83,
    "p3.16xlarge": 7.34, "p3.8xlarge": 3.67, "p3.2xlarge": 0.92,
    "g6.xlarge": 0.34, "g6.12xlarge": 1.95, "g5.xlarge": 0.43, "g5.12xlarge": 2.27,
    "g5.48xlarge": 6.52, "g4dn.xlarge": 0.21, "g4dn.12xlarge": 1.60,
}


def now_ms():
    return int(time.time() * 1000)


def log(msg):
    sys.stderr.write("mockcloud: %s\n" % msg)
    sys.stderr.flush()


def hex17():
    return "%017x" % secrets.randbits(68)


def default_price(instance_type, zone):
    h = int.from_bytes(hashlib.sha256(("%s|%s" % (instance_type, zone)).encode()).digest()[:8], "big")
    base = BASE_PRICES.get(instance_type)
    if base is None:
        base = 0.10 + (h % 4900) / 1000.0
    factor = 0.85 + ((h >> 16) % 31) / 100.0
    return "%.6f" % (base * factor)


class Scheduler:
    """One thread running callbacks at monotonic deadlines."""

    def __init__(self):
        self._heap = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._thread.start()

    def at(self, delay_s, fn, *args):
        with self._cv:
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, delay_s), next(self._seq), fn, args))
            self._cv.notify()

    def stop(self):
        with self._cv:
            self._stop = True
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                while not self._stop and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cv.wait(timeout)
                if self._stop:
                    return
                _, _, fn, args = heapq.heappop(self._heap)
            try:
                fn(*args)
            except Exception as e:  # keep the scheduler alive
                log("scheduled task failed: %r" % (e,))


class Cloud:
    def __init__(self, cfg):
        self.cfg = cfg
        self.lock = threading.RLock()
        self.sched = Scheduler()
        self.state_dir = cfg.state_dir
        self.state_file = os.path.join(self.state_dir, "state.json")
        self.meta_dir = os.path.join(self.state_dir, "node-meta")
        self.nodes_dir = os.path.join(self.state_dir, "nodes")
        os.makedirs(self.meta_dir, exist_ok=True)
        os.makedirs(self.nodes_dir, exist_ok=True)
        # The nodes read the cloud's network rules from here (node-up, netpolicy.c).
        os.environ["NODE_NET_POLICY"] = os.path.join(os.path.abspath(self.state_dir), "net-policy")
        self.boot_delay_ms = cfg.boot_delay_ms
        # The clouds' time (timing.py; None: off, every boot takes boot_delay_ms).
        self.timing = getattr(cfg, "timing", None)
        self.latency_ms = cfg.latency_ms
        self.shutdown_delay_ms = cfg.shutdown_delay_ms
        self.started_at = now_ms()
        self.shutting_down = False
        self.node_threads = set()
        # persisted
        self.instances = {}        # id -> dict
        self.order = []            # instance ids in launch order
        # Indexes over self.order (not persisted, rebuilt by add_instance), so a listing
        # costs its answer, not every instance ever launched: launch position by id, and
        # ids in launch order by provider and by (provider, region).
        self.pos = {}
        self.by_provider = {}
        self.by_region = {}
        self.reservations = {}     # id -> dict
        self.tokens = {}           # "region|token" -> {"reservation_id", "fingerprint"}
        self.key_pairs = {}        # "region|name" -> dict
        self.spot_requests = {}    # sir id -> dict
        self.price_history = {}    # "type|zone" -> [[ts_ms, price], ...] (overrides only)
        self.capacity = {}         # "type|zone" -> max live instances (absent: unlimited)
        # The Spot Advisor's data (GET /spot-advisor-data.json): region -> type -> {"r", "s"}
        self.spot_advisor = {}
        self.spot_advisor_down = False
        self.ip_counter = 0
        self.extra = {}            # per-provider module state (gce.py: operations, request ids)
        # not persisted
        self.faults = []
        self.fault_counts = {}
        self.calls = {"total": 0, "by_action": {}, "by_region": {}, "by_code": {}, "by_account": {}}
        # Hollow mode (docs/mock-cloud.md, "Hollow nodes"): no sshd per instance; one
        # hollow-node process serves every address of a range, and an instance's node
        # exists while DIR/nodes/IP.keys does. The cloud writes that file at boot and
        # removes it at termination, from the scheduler's thread: no thread per instance.
        self.hollow_dir = getattr(cfg, "hollow_dir", None)
        if self.hollow_dir:
            os.makedirs(os.path.join(self.hollow_dir, "nodes"), exist_ok=True)
        # save() writes the whole state file; with thousands of instances that is the
        # mock's largest cost, so with save_interval_ms > 0 changes are written at most
        # that often (and at shutdown) instead of at each change.
        self.save_interval_s = getattr(cfg, "save_interval_ms", 0) / 1000.0
        self._save_due = False
        self.load()

    # ---------------------------------------------------------------- persistence
    def add_instance(self, inst):
        """A new instance, last in launch order (called with the lock held)."""
        iid = inst["id"]
        self.instances[iid] = inst
        self.pos[iid] = len(self.order)
        self.order.append(iid)
        prov = inst.get("provider", "aws")
        self.by_provider.setdefault(prov, []).append(iid)
        self.by_region.setdefault((prov, inst.get("region")), []).append(iid)

    def in_region(self, provider, region):
        """The instances of one provider's region, in launch order."""
        return [self.instances[i] for i in self.by_region.get((provider, region), ())]

    def of_provider(self, provider):
        return [self.instances[i] for i in self.by_provider.get(provider, ())]

    def save(self):
        if self.save_interval_s <= 0:
            self.save_now()
            return
        with self.lock:
            if self._save_due:
                return
            self._save_due = True
        self.sched.at(self.save_interval_s, self._save_batched)

    def _save_batched(self):
        with self.lock:
            if not self._save_due:
                return
            self.save_now()

    def save_now(self):
        with self.lock:
            self._save_due = False
            data = {
                "version": 1, "instances": [self.instances[i] for i in self.order],
                "reservations": self.reservations, "tokens": self.tokens,
                "key_pairs": self.key_pairs, "spot_requests": self.spot_requests,
                "price_history": self.price_history, "capacity": self.capacity,
                "ip_counter": self.ip_counter, "boot_delay_ms": self.boot_delay_ms, "extra": self.extra,
                "saved_at": now_ms(),
            }
            tmp = self.state_file + ".tmp.%d" % threading.get_ident()
            with open(tmp, "w") as f:
                if self.save_interval_s > 0:
                    # Without indent json uses its C encoder: 10x faster on a large state.
                    f.write(json.dumps(data, sort_keys=True))
                else:
                    json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.state_file)
            # What the network lets through follows every change (netpolicy.py). Not in
            # hollow mode: the rules are the sshd nodes' connect() filter, which hollow
            # nodes do not have, and the file lists every (node, allowed source) pair: a
            # security group that admits itself makes it quadratic (1,100 instances in one
            # group: 1.4 million lines, 67 MB, that took describes from 25 ms to 15-30 s).
            if not self.hollow_dir:
                from . import netpolicy
                netpolicy.write(self)

    def load(self):
        if not os.path.exists(self.state_file):
            self.save()
            return
        with open(self.state_file) as f:
            data = json.load(f)
        for inst in data.get("instances", []):
            self.add_instance(inst)
        self.reservations = data.get("reservations", {})
        self.tokens = data.get("tokens", {})
        self.key_pairs = data.get("key_pairs", {})
        self.spot_requests = data.get("spot_requests", {})
        self.price_history = data.get("price_history", {})
        self.capacity = data.get("capacity", {})
        self.ip_counter = data.get("ip_counter", 0)
        self.extra = data.get("extra", {})
        log("reloaded %d instances from %s" % (len(self.instances), self.state_file))

    def resume(self):
        """After a reload: continue every transition that was under way and bring the
        nodes of running instances up again."""
        with self.lock:
            for iid in self.order:
                inst = self.instances[iid]
                st = inst["state"]
                if st == "pending":
                    self._start_boot(inst, restart=True)
                elif st == "running" and self.hollow_dir:
                    inst["node"] = "up" if self._hollow_up(inst) else "down"
                elif st == "running":
                    inst["node"] = "starting"
                    self._spawn(self._node_restart, iid)
                    if inst.get("interrupt_at_ms"):
                        self.sched.at((inst["interrupt_at_ms"] - now_ms()) / 1000.0,
                                      self._interrupt_fire, iid)
                elif st == "shutting-down":
                    self.sched.at(0, self._finish_terminate, iid)
            self.save()

    # ---------------------------------------------------------------- ids, ips
    def new_ip(self):
        self.ip_counter += 1
        n = self.ip_counter
        if self.hollow_dir:
            # The hollow node serves one contiguous range: first, first + 1, ...
            if n > self.cfg.hollow_count:
                raise RuntimeError("out of node IPs (--hollow-count %d)" % self.cfg.hollow_count)
            a = self.cfg.hollow_first + n - 1
            return "%d.%d.%d.%d" % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255)
        base = self.cfg.node_ip_base.strip(".")
        octets = base.split(".")
        if len(octets) == 2:
            if n > 254 * 256:
                raise RuntimeError("out of node IPs")
            return "%s.%d.%d" % (base, (n - 1) // 254, (n - 1) % 254 + 1)
        if len(octets) == 3:
            if n > 254:
                raise RuntimeError("out of node IPs")
            return "%s.%d" % (base, n)
        raise RuntimeError("--node-ip-base must have 2 or 3 octets")

    # ---------------------------------------------------------------- faults
    def take_fault(self, kind, match=None, provider="aws"):
        """Consume one pending fault of `kind` for which match(fault) is true. A fault
        belongs to one provider's API ("provider" in its body, default aws)."""
        with self.lock:
            for f in self.faults:
                if f["kind"] != kind or f.get("count", 1) <= 0 or f.get("provider", "aws") != provider:
                    continue
                if match is not None and not match(f):
                    continue
                f["count"] = f.get("count", 1) - 1
                if f["count"] <= 0:
                    self.faults.remove(f)
                self.fault_counts[kind] = self.fault_counts.get(kind, 0) + 1
                return f
        return None

    def count_call(self, action, region, code, account=None):
        with self.lock:
            c = self.calls
            if account:
                a = c.setdefault("by_account", {}).setdefault(account, {})
                a[action] = a.get(action, 0) + 1
            c["total"] += 1
            c["by_action"][action] = c["by_action"].get(action, 0) + 1
            r = c["by_region"].setdefault(region or "-", {})
            r[action] = r.get(action, 0) + 1
            c["by_code"][code] = c["by_code"].get(code, 0) + 1

    # ---------------------------------------------------------------- visibility
    def visible(self, inst):
        if inst["state"] != "terminated":
            return True
        ta = inst.get("terminated_at")
        return ta is None or now_ms() - ta < self.cfg.terminated_ttl_s * 1000

    # ---------------------------------------------------------------- state machine
    def set_state(self, inst, state):
        inst["state"] = state
        inst["state_changed_at"] = now_ms()

    def _spawn(self, fn, *args):
        th = threading.Thread(target=fn, args=args, daemon=True)
        with self.lock:
            self.node_threads.add(th)
        th.start()
        return th

    def _start_boot(self, inst, restart=False):
        """inst is pending: start its node now; report running at launch + boot delay."""
        iid = inst["id"]
        if self.timing is not None and "boot_family" not in inst:
            # Launch to SSH drawn once per instance (a restart keeps its draw).
            inst["boot_delay_ms"], inst["boot_family"] = self.timing.boot_ms(
                inst.get("provider", "aws"), inst["instance_type"], inst.get("accelerators"))
            log("instance %s (%s, %s) boots in %d ms" % (iid, inst["instance_type"], inst["boot_family"],
                                                         inst["boot_delay_ms"]))
        if not restart and "slow_boot_ms" not in inst:
            # A straggler, whatever the model draws (tests of the broker's boot deadline).
            f = self.take_fault("slow_boot", lambda f: f.get("region") in (None, inst["region"]),
                                provider=inst.get("provider", "aws"))
            inst["slow_boot_ms"] = int(f.get("ms", 60000)) if f else 0
            if f:
                inst["boot_delay_ms"] = inst["slow_boot_ms"]
                log("instance %s boots slowly: %d ms (slow_boot fault)" % (iid, inst["slow_boot_ms"]))
        delay_ms = inst.get("boot_delay_ms", self.boot_delay_ms)
        due = inst["launched_at"] + delay_ms
        if inst.get("fail_boot"):
            self.sched.at((due - now_ms()) / 1000.0, self._fail_boot, iid)
            return
        if self.hollow_dir:
            # Writing one small file is all a hollow boot takes: done here, under the
            # lock, as node-up would have been before the boot delay ran out.
            if self._hollow_up(inst):
                self._node_booted(inst, due)
            else:
                self.sched.at(0, self._boot_failed, iid)
            return
        inst["node"] = "starting"
        self._spawn(self._boot_node, iid, due, restart)

    def _fail_boot(self, iid):
        with self.lock:
            inst = self.instances[iid]
            if inst["state"] != "pending":
                return
            self._launch_failed(inst, "Server.InsufficientInstanceCapacity", "Insufficient capacity.",
                                "instance-terminated-no-capacity",
                                "Your Spot Instance was terminated because there is no Spot capacity "
                                "available that matches your request.")
        log("instance %s failed to launch (partial fault)" % iid)

    def _node_booted(self, inst, due_ms):
        """Under the lock: inst's node (hollow or sshd) is up; the instance reports
        running at due_ms, its launch plus the boot delay."""
        inst["node"] = "up"
        self.sched.at((due_ms - now_ms()) / 1000.0, self._mark_running, inst["id"])

    def _launch_failed(self, inst, code, text, spot_code, spot_text):
        """Under the lock: pending inst failed to launch. It goes to shutting-down with
        the state reason CODE ("CODE: TEXT"), its spot request closes with SPOT_CODE,
        and it is terminated after the shutdown delay."""
        inst["state_reason"] = {"code": code, "message": "%s: %s" % (code, text)}
        inst["reason"] = "%s: %s" % (code, text)
        self.set_state(inst, "shutting-down")
        self._spot_status(inst, spot_code, spot_text, closed=True)
        self.save()
        self.sched.at(self.shutdown_delay_ms / 1000.0, self._finish_terminate, inst["id"])

    def _internal_error(self, inst):
        """Under the lock: node-up failed (sshd or hollow) for pending inst."""
        inst["node"] = "down"
        self._launch_failed(inst, "Server.InternalError", "Internal error on launch",
                            "instance-terminated-by-service",
                            "Your Spot Instance was terminated by the service.")

    def _hollow_keys(self, inst):
        return os.path.join(self.hollow_dir, "nodes", inst["ip"] + ".keys")

    @staticmethod
    def _write_keys(inst, path):
        """inst's authorized_keys at path (mode 0600), written whole (a temporary file
        renamed) so a node never reads half of it."""
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            for k in inst.get("authorized_keys", []):
                f.write(k.strip() + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)

    def _hollow_up(self, inst):
        """The node at inst's address exists from now: its authorized_keys file."""
        path = self._hollow_keys(inst)
        try:
            self._write_keys(inst, path)
            return True
        except OSError as e:
            log("hollow node %s: cannot write %s: %r" % (inst["id"], path, e))
            return False

    def _hollow_down(self, inst):
        try:
            os.unlink(self._hollow_keys(inst))
        except FileNotFoundError:
            pass

    def _boot_failed(self, iid):
        """node-up failed (or the hollow keys could not be written): the instance goes
        from pending to terminated with an internal error."""
        with self.lock:
            inst = self.instances[iid]
            if inst["state"] != "pending" or self.shutting_down:
                return
            self._internal_error(inst)

    def _node_paths(self, iid):
        return (os.path.join(self.nodes_dir, iid), os.path.join(self.meta_dir, iid + ".keys"),
                os.path.join(self.meta_dir, iid + ".log"))

    def _run_script(self, name, args, logfile, env=None):
        script = os.path.join(self.cfg.node_bin_dir, name)
        with open(logfile, "a") as lf:
            lf.write("+ %s %s\n" % (script, " ".join(args)))
            lf.flush()
            try:
                r = subprocess.run([script] + args, stdin=subprocess.DEVNULL, stdout=lf,
                                   stderr=lf, timeout=self.cfg.node_timeout_s, env=env)
                return r.returncode == 0
            except (OSError, subprocess.TimeoutExpired) as e:
                lf.write("mockcloud: %s failed: %r\n" % (name, e))
                return False

    def _node_up(self, iid):
        inst = self.instances[iid]
        d, keys, lg = self._node_paths(iid)
        self._write_keys(inst, keys)
        if not self.cfg.nodes:
            return True
        return self._run_script("node-up", [d, inst["ip"], str(self.cfg.ssh_port), keys], lg,
                                env=self._node_time_env(self._node_fabric_env(inst)))

    def _node_time_env(self, env):
        """The model's stages on the node (timing.py): a fresh node pulls an image it does
        not have in NODE_MODEL_PULL_MS_PER_GB x its size, fetches the dataset in
        NODE_MODEL_FETCH_MS before its first container; nothing when the model is off."""
        if self.timing is None:
            return env
        env = dict(env if env is not None else os.environ)
        t = self.timing
        env["NODE_MODEL_PULL_MS_PER_GB"] = str(int(round(t.p["pull_s_per_gb"] * t.scale * 1000)))
        env["NODE_MODEL_IMAGE_GB"] = " ".join(["default=%g" % t.p["image_gb_default"]] +
                                              ["%s=%g" % (k, v) for k, v in sorted(t.p["image_gb"].items())])
        env["NODE_MODEL_FETCH_MS"] = str(t.fetch_ms())
        return env

    @staticmethod
    def _node_fabric_env(inst):
        """The node's fabric follows what the cloud attached, as on a real host: an EC2
        instance has one EFA device per efa/efa-only interface it was launched with (EC2
        User Guide, "Elastic Fabric Adapter": the EFA device appears only with an EFA
        interface), an OCI instance in a compute cluster has its RDMA NICs (OCI docs,
        "Compute Clusters"). Anything else has none. A NODE_FABRIC set by a test wins."""
        if os.environ.get("NODE_FABRIC"):
            return None
        efa = sum(1 for t in inst.get("iface_types") or [] if t in ("efa", "efa-only"))
        if efa:
            fabric = "efa:%d" % efa
        elif inst.get("compute_cluster_id"):
            fabric = "rdma:1"
        else:
            return None
        env = dict(os.environ)
        env["NODE_FABRIC"] = fabric
        return env

    def _node_down(self, iid):
        d, _, lg = self._node_paths(iid)
        if not self.cfg.nodes:
            return True
        ok = self._run_script("node-down", [d], lg)
        if not ok:
            log("node-down failed for %s (see %s)" % (iid, lg))
        return ok

    def _boot_node(self, iid, due_ms, restart):
        try:
            if restart:
                self._node_down(iid)
            ok = self._node_up(iid) if not self.shutting_down else False
            with self.lock:
                inst = self.instances[iid]
                if ok and inst["state"] == "pending" and not self.shutting_down:
                    self._node_booted(inst, due_ms)
                    return
                if not ok and inst["state"] == "pending" and not self.shutting_down:
                    log("node-up failed for %s (see %s)" % (iid, self._node_paths(iid)[2]))
                    self._internal_error(inst)
                inst["node"] = "down-pending"
            # terminated (or shutting down) while booting: take the node down again
            self._node_down(iid)
            with self.lock:
                self.instances[iid]["node"] = "down"
                self.save()
        finally:
            with self.lock:
                self.node_threads.discard(threading.current_thread())

    def _node_restart(self, iid):
        try:
            self._node_down(iid)
            ok = self._node_up(iid)
            with self.lock:
                inst = self.instances[iid]
                inst["node"] = "up" if ok else "down"
                if not ok:
                    log("node-up failed on restart for %s" % iid)
                self.save()
        finally:
            with self.lock:
                self.node_threads.discard(threading.current_thread())

    def _mark_running(self, iid):
        with self.lock:
            inst = self.instances[iid]
            if inst["state"] != "pending":
                return
            self.set_state(inst, "running")
            inst["running_at"] = now_ms()
            self.save()
        log("instance %s running at %s" % (iid, inst["ip"]))

    def begin_terminate(self, inst, by_service=False):
        """Called with the lock held. Returns the previous state."""
        prev = inst["state"]
        if prev in ("shutting-down", "terminated"):
            return prev
        self.set_state(inst, "shutting-down")
        # When the termination was asked for (by the user or the service), for tests that
        # check the history against this record (tests/integration/jepsen.sh).
        inst["terminate_requested_at"] = now_ms()
        if by_service:
            inst["state_reason"] = {"code": "Server.SpotInstanceTermination",
                                    "message": "Server.SpotInstanceTermination: Spot instance termination"}
            inst["reason"] = "Service initiated (%s)" % time.strftime("%Y-%m-%d %H:%M:%S GMT", time.gmtime())
            self._spot_status(inst, "instance-terminated-by-service",
                              "Your Spot Instance was terminated by the service.", closed=True)
        else:
            inst["state_reason"] = {"code": "Client.UserInitiatedShutdown",
                                    "message": "Client.UserInitiatedShutdown: User initiated shutdown"}
            inst["reason"] = "User initiated (%s)" % time.strftime("%Y-%m-%d %H:%M:%S GMT", time.gmtime())
            self._spot_status(inst, "instance-terminated-by-user",
                              "Spot Instance terminated due to user-initiated termination.", closed=True)
        inst["interrupt_at_ms"] = None
        self.sched.at(self.shutdown_delay_ms / 1000.0, self._finish_terminate, inst["id"])
        return prev

    def _finish_terminate(self, iid):
        with self.lock:
            inst = self.instances[iid]
            if inst["state"] != "shutting-down":
                return
            node = inst.get("node")
            if node == "up" and self.hollow_dir:
                self._hollow_down(inst)
                inst["node"] = "down"
                node = "down"
            if node == "up":
                inst["node"] = "down-pending"
        if node == "up":
            self._spawn(self._down_then_terminated, iid)
        else:  # never booted, or the boot thread takes it down itself
            self._terminated(iid)

    def _down_then_terminated(self, iid):
        try:
            self._node_down(iid)
            with self.lock:
                self.instances[iid]["node"] = "down"
            self._terminated(iid)
        finally:
            with self.lock:
                self.node_threads.discard(threading.current_thread())

    def _terminated(self, iid):
        with self.lock:
            inst = self.instances[iid]
            if inst["state"] == "terminated":
                return
            self.set_state(inst, "terminated")
            inst["terminated_at"] = now_ms()
            self.save()
        log("instance %s terminated" % iid)

    # ---------------------------------------------------------------- spot
    def _spot_status(self, inst, code, message, closed=False):
        sir = self.spot_requests.get(inst.get("sir_id") or "")
        if not sir:
            return
        sir["status_code"] = code
        sir["status_message"] = message
        sir["update_time"] = now_ms()
        if closed:
            sir["state"] = "closed"

    def interrupt(self, iid, notice_s):
        """A spot interruption as EC2 does it: the spot request goes to
        marked-for-termination with the notice, and the instance is terminated by the
        service when it runs out (two minutes on EC2): "Spot Instance interruption notices",
        https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
        and the request status codes of "Spot request status",
        https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-request-status.html.
        OCI's preemption (oci.py's preemptible instances) reuses it: a reclaimed
        preemptible instance is terminated (preemptionAction TERMINATE), "Preemptible
        Instances", https://docs.oracle.com/en-us/iaas/Content/Compute/Concepts/preemptible.htm."""
        with self.lock:
            inst = self.instances.get(iid)
            if inst is None:
                raise KeyError("no instance %s" % iid)
            if not inst.get("spot"):
                raise ValueError("instance %s is not a spot instance" % iid)
            if inst["state"] not in ("pending", "running"):
                raise ValueError("instance %s is %s" % (iid, inst["state"]))
            at = now_ms() + int(notice_s * 1000)
            inst["interrupt_at_ms"] = at
            self.fault_counts["interrupt"] = self.fault_counts.get("interrupt", 0) + 1
            if notice_s <= 0:
                # No notice at all (the instance just goes): terminated in this same step,
                # so no describe can list it running and marked in between.
                self.begin_terminate(inst, by_service=True)
                self.save()
                log("instance %s interrupted by the service without notice" % iid)
                return at
            self._spot_status(inst, "marked-for-termination",
                              "Your Spot Instance is marked for termination.")
            self.save()
        self.sched.at(notice_s, self._interrupt_fire, iid)
        log("instance %s marked for termination in %ss" % (iid, notice_s))
        return at

    def correlated_interrupt(self, zone, instance_type, k, window_s, notice_s, provider, preempt):
        """A correlated loss (timing.py, "correlation_window_s"): k live spot instances of one
        (zone, type) interrupted within window_s, the first now, the others at seeded
        uniform offsets. Returns [(instance id, offset s)]. preempt(iid, notice) is the
        provider's own interruption (gce.preempt for Compute)."""
        rng_model = self.timing
        with self.lock:
            pool = sorted(i["id"] for i in self.instances.values()
                          if i.get("provider", "aws") == provider and i["zone"] == zone and
                          i["instance_type"] == instance_type and i.get("spot") and
                          i["state"] in ("pending", "running") and not i.get("interrupt_at_ms"))
            if len(pool) < k:
                raise ValueError("%d live spot instance(s) of %s in %s, fewer than %d" %
                                 (len(pool), instance_type, zone, k))
            if rng_model is not None:
                with rng_model.lock:
                    victims = rng_model.rng.sample(pool, k)
                offsets = rng_model.correlated_offsets(k, window_s)
            else:
                import random
                victims = random.sample(pool, k)
                offsets = [0.0] + sorted(random.uniform(0.0, window_s) for _ in range(k - 1))
        plan = list(zip(victims, offsets))
        for iid, off in plan:
            if off <= 0:
                preempt(iid, notice_s)
            else:
                self.sched.at(off, self._correlated_fire, preempt, iid, notice_s)
        log("correlated interruption of %d %s in %s: %s" % (
            k, instance_type, zone, ", ".join("%s +%.1fs" % p for p in plan)))
        return plan

    def _correlated_fire(self, preempt, iid, notice_s):
        try:
            preempt(iid, notice_s)
        except (KeyError, ValueError) as e:  # gone meanwhile
            log("correlated interruption of %s skipped: %s" % (iid, e))

    def _interrupt_fire(self, iid):
        with self.lock:
            inst = self.instances[iid]
            at = inst.get("interrupt_at_ms")
            if not at or inst["state"] not in ("pending", "running"):
                return
            if at > now_ms() + 5:  # re-armed later
                return
            self.begin_terminate(inst, by_service=True)
            self.save()
        log("instance %s interrupted by the service" % iid)

    # ---------------------------------------------------------------- prices
    def price_items(self, instance_type, zone):
        """[(ts_ms, price)] newest first."""
        hist = [(self.started_at - 3600 * 1000, default_price(instance_type, zone))]
        hist += [tuple(x) for x in self.price_history.get("%s|%s" % (instance_type, zone), [])]
        return sorted(hist, key=lambda x: -x[0])

    def set_price(self, instance_type, zone, price):
        with self.lock:
            self.price_history.setdefault("%s|%s" % (instance_type, zone), []).append([now_ms(), price])
            self.save()

    # ---------------------------------------------------------------- shutdown
    def shutdown(self):
        """SIGTERM: take every node down (instances keep their recorded state, so a
        restart with the same state dir brings them up again)."""
        with self.lock:
            self.shutting_down = True
        self.sched.stop()
        deadline = time.monotonic() + 30
        while True:
            with self.lock:
                busy = [th for th in self.node_threads if th.is_alive()]
            if not busy or time.monotonic() > deadline:
                break
            busy[0].join(0.2)
        if self.hollow_dir:
            # The hollow nodes stop with the cloud (as the sshd nodes do below); a
            # restart with the same state dir writes their keys again (resume()).
            with self.lock:
                todo = [i for i in self.order if self.instances[i].get("node") == "up"]
                for iid in todo:
                    self._hollow_down(self.instances[iid])
                    self.instances[iid]["node"] = "down"
                self.save_now()
            log("stopped %d hollow nodes" % len(todo))
            return
        with self.lock:
            todo = [i for i in self.order if self.instances[i].get("node") in ("up", "starting", "down-pending")]
        ths = []
        for iid in todo:
            th = threading.Thread(target=self._node_down, args=(iid,))
            th.start()
            ths.append(th)
        for th in ths:
            th.join(self.cfg.node_timeout_s + 5)
        with self.lock:
            for iid in todo:
                self.instances[iid]["node"] = "down"
            self.save_now()
        log("stopped %d nodes" % len(todo))
