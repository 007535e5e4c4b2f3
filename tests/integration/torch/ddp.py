"""A standard DDP job with checkpoint/resume, one process per node, gloo on CPU.

As the platform's demos do: rank 0 saves {model, optimizer, step} to
CHECKPOINT_ARTIFACT_PATH every few steps; on start EVERY rank loads it if present, so
every rank must see the same checkpoint (issue 31: a rank that starts from step 0
while the others resume waits in a collective they never join). SGD with momentum:
a rank that missed the optimizer state ends with other weights.

Prints, for tests/integration/torch.sh: "rendezvous rank=R cycle=C t=MS" before the
rendezvous and "joined ..." after it, "resume rank=R step=S cycle=C" at the start and
"done rank=R step=S weights=SHA256" at the end (the hash of the rank's parameters).
Usage: ddp.py STEPS SECONDS_PER_STEP
"""
import datetime
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

steps, pause = int(sys.argv[1]), float(sys.argv[2])
rank = int(os.environ["RANK"])
world = int(os.environ["NNODES"]) * int(os.environ["N_PROC"])
ckpt = os.path.join(os.environ["CHECKPOINT_ARTIFACT_PATH"], "ddp.pt")
cycle = os.environ["STRONG_CYCLE_COUNT"]
# When this rank entered the rendezvous and when all had joined (issue 46: a kept rank
# started early waits here for the replacement's).
print("rendezvous rank=%d cycle=%s t=%d" % (rank, cycle, time.time() * 1000), flush=True)
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=90))
print("joined rank=%d cycle=%s t=%d" % (rank, cycle, time.time() * 1000), flush=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
start = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    start = state["step"]
print("resume rank=%d step=%d cycle=%s" % (rank, start, os.environ["STRONG_CYCLE_COUNT"]),
      flush=True)
ddp = DDP(model)
for step in range(start, steps):
    g = torch.Generator().manual_seed(1000 + step * world + rank)  # this rank's batch
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
    loss = ((ddp(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step rank=%d step=%d loss=%.6f" % (rank, step + 1, loss.item()), flush=True)
    if rank == 0 and (step + 1) % 5 == 0:
        tmp = ckpt + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "step": step + 1}, tmp)
        os.replace(tmp, ckpt)  # a sync never brings home half a checkpoint
    time.sleep(pause)
weights = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
print("done rank=%d step=%d weights=%s" % (rank, steps, weights.hexdigest()), flush=True)
dist.barrier()
dist.destroy_process_group()
