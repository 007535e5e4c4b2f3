# The mock pytorch image's train.py: a few "steps" per process, the checkpoint
# written by global rank 0 into /mnt/checkpoints (brought home by the broker).
import os
import time

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
for step in range(1, 4):
    print("rank %d/%d step %d loss %.3f" % (rank, world, step, 1.0 / step), flush=True)
    time.sleep(0.2)
if rank == 0:
    try:
        os.makedirs("/mnt/checkpoints", exist_ok=True)
        with open("/mnt/checkpoints/step", "w") as f:
            f.write("3\n")
    except OSError:
        pass
