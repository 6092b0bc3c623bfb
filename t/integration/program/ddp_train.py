"""ddp_train.py - a small PyTorch DDP training script written for torchrun,
run by the tests of `stork run -- PROGRAM` (stork(1), RUNNING YOUR OWN
PROGRAM) as any user's script would be.

It reads only torchrun's environment. The one thing it adds for a
scheduler is what any preemptible torchrun script needs: on the stop signal
(STORK_PREEMPT_SIGNAL, default USR1) it sets a flag; at the next step
boundary the ranks agree (a MAX all-reduce), rank 0 saves model, optimizer
and step to CKPT/state.pt (temporary file, fsync, rename), and every rank
exits STORK_CHECKPOINTED_EXIT (default 10). A start that finds
CKPT/state.pt continues after its step.

Everything is deterministic on the CPU (gloo, one thread, batches drawn per
step from a generator seeded by seed, step and rank), so a run stopped and
resumed writes the same losses, bit for bit, as one that never stopped.

What it leaves in OUT for the tests:
  env.rank-R.json     the rank's torchrun and STORK_* variables, its CPU
                      affinity, pid, process group and host (at each start)
  losses.txt          rank 0: "STEP LOSS" per step, the mean loss over the
                      ranks as float.hex (appended: a restart that trains a
                      step again writes it again)
  params.rank-R.txt   sha256 of the rank's parameters after the last step
                      (equal on every rank: DDP keeps the replicas equal)

Faults, on the first start only (STORK_RESTART_COUNT, else
TORCHELASTIC_RESTART_COUNT, is 0) unless --no-fail-once:
  --fail-rank R --fail-step K  rank R raises RuntimeError at step K
  --hang-rank R --hang-step K  rank R stops its heartbeat at step K and,
                               three steps later, sleeps for ever in
                               stuck_here() (the others then wait for it)
"""

import argparse
import hashlib
import json
import os
import signal
import socket
import sys
import time

stop_requested = False


def on_stop(signum, frame):
    # Only a flag: the signal may come more than once (the launcher and
    # Slurm both send it); the step boundary does the work.
    global stop_requested
    stop_requested = True


# Installed before torch is imported (a second or more), since until then
# the signal's default action would end the process. SA_RESTART (not
# Python's default) spares the system calls of torch's C++ code an EINTR.
_name = (os.environ.get("STORK_PREEMPT_SIGNAL") or "USR1").upper()
STOP_SIGNAL = getattr(signal, _name if _name.startswith("SIG") else "SIG" + _name)
signal.signal(STOP_SIGNAL, on_stop)
signal.siginterrupt(STOP_SIGNAL, False)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

ENV_NAMES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE", "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "PYTHONFAULTHANDLER", "PYTHONUNBUFFERED",
)



def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds each step sleeps")
    p.add_argument("--out", required=True, help="where the results go")
    p.add_argument("--ckpt", default=None,
                   help="checkpoint directory (default: $STORK_CHECKPOINT_DIR, else OUT/ckpt)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-step", type=int, default=-1)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=-1)
    p.add_argument("--fail-once", action=argparse.BooleanOptionalAction, default=True,
                   help="inject the faults on the first start only (default)")
    return p.parse_args()


def restart_count():
    for name in ("STORK_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT"):
        if os.environ.get(name):
            return int(os.environ[name])
    return 0


def write_atomic(path, data):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path, line):
    with open(path, "a") as f:
        f.write(line)


def record_env(out, rank):
    env = {k: os.environ[k] for k in ENV_NAMES if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith("STORK_")})
    env["affinity"] = sorted(os.sched_getaffinity(0))
    env["pid"] = os.getpid()
    env["pgid"] = os.getpgid(0)
    env["host"] = socket.gethostname()
    write_atomic(os.path.join(out, f"env.rank-{rank}.json"),
                 (json.dumps(env, indent=1, sort_keys=True) + "\n").encode())


def heartbeat():
    path = os.environ.get("STORK_HEARTBEAT_FILE")
    if path:
        with open(path, "a"):
            pass
        os.utime(path)


def log_metric(rank, step, name, value):
    path = os.environ.get("STORK_METRICS_FILE")
    if not path:
        return
    line = json.dumps({"ts": time.time(), "job_id": os.environ.get("SLURM_JOB_ID") or "local",
                       "rank": rank, "host": socket.gethostname(), "step": step,
                       "metric": name, "value": value, "unit": ""}, separators=(",", ":"))
    append_line(path, line + "\n")


def stuck_here(rank, step):
    print(f"rank {rank}: hanging at step {step}", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)


def batch(seed, step, rank):
    """The step's batch for this rank: the same on every start."""
    g = torch.Generator().manual_seed((seed * 1_000_003 + step) * 4099 + rank)
    x = torch.randn(16, 8, generator=g)
    w = torch.arange(1, 9, dtype=torch.float32).div(8).unsqueeze(1)
    y = torch.sin(x @ w) + 0.01 * torch.randn(16, 1, generator=g)
    return x, y


def params_sha256(model):
    h = hashlib.sha256()
    for _, p in sorted(model.named_parameters()):
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def ordered_mean(world, bucket):
    """DDP's gradient all-reduce, added in rank order.

    gloo's ring all-reduce adds each element in an order that depends on
    where it sits in DDP's bucket, and DDP lays its buckets out again after
    the first iteration of every start: a resumed run would add some
    gradients in another order than an uninterrupted one and differ in the
    last bits. Gathered and added in rank order, they do not.
    """
    grads = bucket.buffer()
    parts = [torch.empty_like(grads) for _ in range(world)]
    dist.all_gather(parts, grads)
    total = parts[0].clone()
    for part in parts[1:]:
        total += part
    done = torch.futures.Future()
    done.set_result(total.div_(world))
    return done


def save_checkpoint(path, model, opt, step):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@record
def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    if hasattr(torch, "use_deterministic_algorithms"):
        torch.use_deterministic_algorithms(True)
    # The rendezvous' store gives up on an interrupted connect ("Interrupted
    # system call"): the signal waits until the process group is up (the
    # threads started meanwhile keep it blocked: the main thread takes it).
    signal.pthread_sigmask(signal.SIG_BLOCK, {STOP_SIGNAL})
    dist.init_process_group("gloo", init_method="env://")
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {STOP_SIGNAL})
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(args.out, exist_ok=True)
    ckpt_dir = args.ckpt or os.environ.get("STORK_CHECKPOINT_DIR") or os.path.join(args.out, "ckpt")
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt = os.path.join(ckpt_dir, "state.pt")
    record_env(args.out, rank)
    first_start = restart_count() == 0 or not args.fail_once

    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"] + 1
    # Every rank must resume at the same step (a checkpoint one rank cannot
    # see would make it train other steps and wait in other collectives).
    agreed = torch.tensor([start])
    dist.broadcast(agreed, 0)
    if agreed.item() != start:
        raise RuntimeError(f"rank {rank} resumes at step {start}, rank 0 at {agreed.item()}: "
                           f"is {ckpt_dir} shared by every node?")
    if rank == 0 and start:
        print(f"resuming from {ckpt} at step {start}", flush=True)
    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(world, ordered_mean)

    for step in range(start, args.steps):
        if first_start and rank == args.fail_rank and step == args.fail_step:
            raise RuntimeError(f"injected failure on rank {rank} at step {step}")
        silent = first_start and rank == args.hang_rank and step >= args.hang_step
        if silent and step == args.hang_step + 3:
            stuck_here(rank, step)
        x, y = batch(args.seed, step, rank)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        # gloo's all-reduce of one number may add the ranks' losses in any
        # order; gathered and added in rank order, the mean is reproducible
        losses = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(losses, loss.detach().reshape(1))
        mean = sum(t.item() for t in losses) / world
        if rank == 0:
            append_line(os.path.join(args.out, "losses.txt"), f"{step} {mean.hex()}\n")
            print(f"step {step} loss {mean:.6f}", flush=True)
        if not silent:
            heartbeat()
            log_metric(rank, step, "train_loss", mean)
        if args.step_sleep:
            time.sleep(args.step_sleep)
        # The step boundary: stop together, at the same step.
        flag = torch.tensor([1 if stop_requested else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item():
            if rank == 0:
                save_checkpoint(ckpt, model, opt, step)
                print(f"checkpoint of step {step} saved in {ckpt}", flush=True)
            dist.barrier()
            dist.destroy_process_group()
            sys.exit(int(os.environ.get("STORK_CHECKPOINTED_EXIT") or 10))

    write_atomic(os.path.join(args.out, f"params.rank-{rank}.txt"),
                 (params_sha256(model) + "\n").encode())
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
