"""One process per node: an all_reduce over gloo across the burst's nodes.

Rendezvous from the broker's environment only (init_method="env://": MASTER_ADDR,
MASTER_PORT; RANK; WORLD_SIZE from NNODES x N_PROC), as a platform script does.
Prints what every rank must agree on; tests/integration/torch.sh compares the ranks' logs.
"""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["NNODES"]) * int(os.environ["N_PROC"])
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(rank + 1), 10.0 * (rank + 1)])
dist.all_reduce(t, op=dist.ReduceOp.SUM)
print("allreduce rank=%d world=%d sum=%d,%d torch=%s gloo_if=%s" % (
    rank, world, int(t[0]), int(t[1]), torch.__version__, os.environ.get("GLOO_SOCKET_IFNAME", "")),
    flush=True)
dist.barrier()
dist.destroy_process_group()
