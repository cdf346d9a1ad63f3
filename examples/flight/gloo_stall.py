"""Two gloo ranks (real processes); rank 1 stalls in ``stall()`` at step 3 while rank 0 waits in
``all_reduce``.  argv: OUT PORT."""

import os
import sys
import time

import torch.distributed as dist

import openmsprof
import torch


def stall() -> None:
    time.sleep(4.0)


def train_step(t: torch.Tensor) -> None:
    dist.all_reduce(t)


def main(rank: int, out: str, port: str) -> None:
    os.environ["TORCH_FR_BUFFER_SIZE"] = "200"
    os.environ["RANK"] = str(rank)
    dist.init_process_group("gloo", rank=rank, world_size=2, init_method=f"tcp://127.0.0.1:{port}")
    t = torch.ones(16)
    with openmsprof.flight_recorder(out, hang_s=1.0, keep_s=30, signal=None) as fr:
        for i in range(6):
            time.sleep(0.05)
            if rank == 1 and i == 3:
                stall()
            train_step(t)
            fr.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=main, args=(r, sys.argv[1], sys.argv[2])) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    sys.exit(max(p.exitcode or 0 for p in procs))
