"""The clouds' time (issue 46): a timing model for the mock clouds and their nodes.

Off by default: without --time-model every instance boots in --boot-delay-ms, pulls
in NODE_PULL_DELAY_MS, and launches are never throttled, as before. With it, each
parameter below is the published figure it cites (../shared/docs/cloud-time-facts.md
gathers the sources), and `time_scale` multiplies every duration of the model (boot,
pull, fetch, notice, correlation window) and divides every rate (the launch buckets'
refill), so a test or `make demo` runs the same model faster. Draws come from one
random.Random seeded with `seed`, printed at start, so a run can be replayed.

The parameters are a dict (DEFAULTS); --time-model FILE.json overrides any of them
(a shallow merge per top-level key, `families` per family).
"""
import json
import math
import random
import threading
import time

DEFAULTS = {
    # Launch to SSH, a lognormal per family: median_s is exp(mu), sigma the log's sd.
    "families": {
        # CPU VMs: 25.8 s from RunInstances to SSH on m7i.large, 3 runs
        # (brevdev/ec2-coldboot-research); the spread is an assumption (no published sd).
        "vm": {"median_s": 25.0, "sigma": 0.35},
        # GPU VMs: 80-120 s to provision and boot (Tensorfuse, anecdotal); 1-5 min
        # (Union.ai). Median 90 s; sigma 0.35 is the facts file's assumption
        # ("A suggested model"): 5th-95th percentile about 51-160 s.
        "gpu": {"median_s": 90.0, "sigma": 0.35},
        # Bare metal: EC2 metal over 20 min (canonical/pycloudlib #192); dstack allows
        # 20 min for OCI BM.* and says it "sometimes takes longer than 10 minutes" (PR
        # #1362). Median 8 min is an assumption (no measured median); sigma 0.4 puts the
        # 99th percentile near 20 min (exp(ln 480 + 2.326 * 0.4) = 1,213 s).
        "metal": {"median_s": 480.0, "sigma": 0.4},
    },
    # Launch limits per (cloud, account, region): EC2's RunInstances resource bucket,
    # "a bucket of 1000 instances refilled at 2 per second" (EC2 API reference, "Request
    # throttling", resource token bucket defaults), refused with RequestLimitExceeded.
    # GCP and OCI publish no instance-creation bucket of that kind (their limits are
    # per-minute API quotas and tenancy limits): the same bucket is an assumption there,
    # refused with each cloud's own throttling error (Compute: 403 rateLimitExceeded,
    # "Rate Limit Exceeded"; OCI: 429 TooManyRequests).
    "launch_bucket": {"capacity": 1000, "refill_per_s": 2.0},
    # Image pull on a node's first start of an image: 25-30 s per GB cold (derived from
    # Union.ai's 10 GB CUDA/PyTorch image in 4-5 min); near zero once the node has it.
    "pull_s_per_gb": 27.5,
    # The image's size: Union.ai's 10 GB CUDA/PyTorch image; per image in image_gb.
    "image_gb_default": 10.0,
    "image_gb": {},
    # Dataset fetch onto a fresh node's disk before its first container: dataset_gb at
    # fetch_s_per_gb. 10 s/GB is ~100 MB/s, one S3 connection (the figure
    # tests/bench/datasets.sh takes for S3's per-connection rate). 0 GB: no stage.
    "dataset_gb": 0.0,
    "fetch_s_per_gb": 10.0,
    # Interruption notices: AWS two minutes (EC2 User Guide, "Spot Instance interruption
    # notices"); GCP Spot 30 s (ACPI soft off, "Spot VMs", preemption process); OCI
    # preemptible: "a short notice period" of unstated length, reclaimed "at any time":
    # no notice to count on, so 0.
    "notice_s": {"aws": 120.0, "gcp": 30.0, "oci": 0.0},
    # Correlated loss: interruptions of one type in one zone fall within 3 minutes of
    # each other in over 92% of cases (the "Spot-and-Scoot" study, arXiv 2604.16457).
    "correlation_window_s": 180.0,
}


def merge(base, over):
    out = json.loads(json.dumps(base))
    for k, v in (over or {}).items():
        if k == "families" and isinstance(v, dict):
            for fam, p in v.items():
                out["families"].setdefault(fam, {}).update(p)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k].update(v)
        else:
            out[k] = v
    return out


def family_of(provider, instance_type, accelerators=None):
    """VM, GPU VM or bare metal, from the type's name as each cloud spells it.
    EC2: `*.metal` sizes are bare metal (EC2 User Guide, "Instance type naming"),
    the accelerated families p, g, trn, inf, dl are GPU/accelerator VMs. Compute
    Engine: a2/a3/a4/g2 machine types carry GPUs, other types only with
    guestAccelerators. OCI: BM.* shapes are bare metal, VM.GPU* GPU VMs."""
    t = instance_type or ""
    if provider == "oci":
        if t.startswith("BM."):
            return "metal"
        return "gpu" if t.startswith("VM.GPU") else "vm"
    if provider == "gcp":
        if accelerators or t.split("-")[0] in ("a2", "a3", "a4", "g2"):
            return "gpu"
        return "vm"
    fam, _, size = t.partition(".")
    if size.startswith("metal"):
        return "metal"
    if fam[:1] in ("p", "g") or fam.startswith(("trn", "inf", "dl")):
        return "gpu"
    return "vm"


class TokenBucket:
    """A token bucket: `capacity` tokens, `refill_per_s` added per second up to it. take(n)
    takes n tokens or none (a RunInstances of n instances is throttled whole)."""

    def __init__(self, capacity, refill_per_s, clock=time.monotonic):
        self.capacity = float(capacity)
        self.refill_per_s = float(refill_per_s)
        self.clock = clock
        self.tokens = float(capacity)
        self.t = clock()

    def _refill(self):
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.t) * self.refill_per_s)
        self.t = now

    def take(self, n):
        self._refill()
        if n > self.tokens:
            return False
        self.tokens -= n
        return True

    def level(self):
        self._refill()
        return self.tokens


class Model:
    def __init__(self, params=None, time_scale=1.0, seed=None, clock=time.monotonic):
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        self.p = merge(DEFAULTS, params)
        self.scale = float(time_scale)
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
        self.rng = random.Random(self.seed)
        self.clock = clock
        self.lock = threading.Lock()
        self.buckets = {}

    def describe(self):
        return "timing model on: seed %d, time_scale %g" % (self.seed, self.scale)

    # launch to SSH
    def boot_s(self, family):
        """One launch-to-SSH draw in model seconds (unscaled)."""
        f = self.p["families"][family]
        with self.lock:
            return math.exp(math.log(f["median_s"]) + f["sigma"] * self.rng.gauss(0.0, 1.0))

    def boot_ms(self, provider, instance_type, accelerators=None):
        """A launch-to-SSH draw in real ms (scaled), and the family it was drawn for."""
        fam = family_of(provider, instance_type, accelerators)
        return int(round(self.boot_s(fam) * self.scale * 1000)), fam

    # launch limits
    def take_launch(self, provider, account, region, n):
        """True when n instances may be launched now for (provider, account, region)."""
        key = (provider, account or "", region or "")
        b = self.p["launch_bucket"]
        with self.lock:
            bucket = self.buckets.get(key)
            if bucket is None:
                bucket = self.buckets[key] = TokenBucket(b["capacity"], b["refill_per_s"] / self.scale,
                                                         self.clock)
            return bucket.take(n)

    # image pull and dataset fetch
    def image_gb(self, image):
        return float(self.p["image_gb"].get(image, self.p["image_gb_default"]))

    def pull_ms(self, gb=None):
        """A cold pull of gb GB (default: the default image's size), real ms."""
        gb = self.p["image_gb_default"] if gb is None else gb
        return int(round(gb * self.p["pull_s_per_gb"] * self.scale * 1000))

    def fetch_ms(self):
        return int(round(self.p["dataset_gb"] * self.p["fetch_s_per_gb"] * self.scale * 1000))

    # interruptions
    def notice_s(self, provider):
        """The provider's notice, scaled (real seconds)."""
        return float(self.p["notice_s"].get(provider or "aws", 120.0)) * self.scale

    def correlated_offsets(self, k, window_s=None):
        """k offsets (real seconds) in [0, window]: the first at 0, the others uniform."""
        w = (self.p["correlation_window_s"] if window_s is None else window_s) * self.scale
        with self.lock:
            rest = sorted(self.rng.uniform(0.0, w) for _ in range(max(0, k - 1)))
        return [0.0] + rest if k > 0 else []


def load(path_or_on, time_scale, seed):
    """The model for --time-model (a JSON file of overrides, or "on" for the defaults)."""
    params = None
    if path_or_on and path_or_on != "on":
        with open(path_or_on) as f:
            params = json.load(f)
        if not isinstance(params, dict):
            raise ValueError("%s: want a JSON object of parameters" % path_or_on)
        unknown = set(params) - set(DEFAULTS)
        if unknown:
            raise ValueError("%s: unknown parameter(s) %s" % (path_or_on, ", ".join(sorted(unknown))))
    return Model(params, time_scale, seed)
