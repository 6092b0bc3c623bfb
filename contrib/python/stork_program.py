"""stork_program: the contract of `srun stork run -- PROGRAM` in a few calls.

Stork starts each rank of PROGRAM with torchrun's environment and its own
STORK_* variables (stork(1), RUNNING YOUR OWN PROGRAM). This module reads
them so that a training loop needs no Stork-specific code beyond:

    import stork_program as sp      # first: it installs the signal's handler
    import torch, torch.distributed as dist

    ckpt = os.path.join(sp.checkpoint_dir(), "state.pt")
    start = load(ckpt) + 1 if os.path.exists(ckpt) else 0
    for step in range(start, steps):
        loss = train_step(step)
        sp.metric(step, "train_loss", loss)     # also a heartbeat
        stop = torch.tensor([int(sp.preempted())])
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)   # all stop at this step
        if stop.item():
            if dist.get_rank() == 0:
                save(ckpt, step)
            dist.barrier()
            sp.exit_checkpointed()              # exit code 10

Outside Stork (plain python, torchrun) every call still works: the
checkpoint directory defaults to ./checkpoints, heartbeats and metrics are
not written, and the signal is USR1.

Only the standard library is used. Importing the module installs the
handler of the stop signal (from the main thread; else call install()).
"""

import json
import math
import os
import signal
import socket
import sys
import time

__all__ = ["install", "preempted", "checkpoint_dir", "heartbeat", "metric",
           "exit_checkpointed", "restart_count", "stop_signal"]

_stop_requested = False
_installed_for = None
_previous = None


def stop_signal():
    """The signal Stork stops the program with (STORK_PREEMPT_SIGNAL, default USR1)."""
    name = os.environ.get("STORK_PREEMPT_SIGNAL") or "USR1"
    name = name.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    return getattr(signal, name)


def _on_stop(signum, frame):
    # Only set a flag: the handler may run several times (Stork and Slurm
    # both signal the ranks), the work happens at the next step boundary.
    global _stop_requested
    _stop_requested = True
    if callable(_previous):
        _previous(signum, frame)


def install():
    """Install the stop signal's handler (idempotent), chaining a previous
    Python handler. Call it from the main thread."""
    global _installed_for, _previous
    signum = stop_signal()
    if _installed_for == signum:
        return
    previous = signal.signal(signum, _on_stop)
    # SA_RESTART: system calls in C code (torch's rendezvous, say) go on
    # instead of failing with EINTR; Python's own calls retry either way.
    signal.siginterrupt(signum, False)
    # never chain into ourselves (install() again for another signal)
    _previous = previous if previous is not _on_stop else None
    _installed_for = signum


def preempted():
    """True once the stop signal has arrived: checkpoint and exit_checkpointed()."""
    return _stop_requested


def checkpoint_dir(default="checkpoints"):
    """STORK_CHECKPOINT_DIR (the same across requeues and restarts), else
    default; created if missing."""
    path = os.environ.get("STORK_CHECKPOINT_DIR") or default
    os.makedirs(path, exist_ok=True)
    return path


def restart_count():
    """How many times the program was started before in this run (0 on the
    first start): STORK_RESTART_COUNT, else torchrun's
    TORCHELASTIC_RESTART_COUNT."""
    for name in ("STORK_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT"):
        value = os.environ.get(name)
        if value:
            return int(value)
    return 0


def heartbeat():
    """Tell Stork this rank is alive (touch STORK_HEARTBEAT_FILE); a no-op
    outside Stork."""
    path = os.environ.get("STORK_HEARTBEAT_FILE")
    if not path:
        return
    with open(path, "a"):
        pass
    os.utime(path)


def _int_env(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


def metric(step, name, value, unit=""):
    """Append one metric line to STORK_METRICS_FILE (also a heartbeat); a
    no-op outside Stork. value is any number (a float, an int, a one-element
    tensor); a NaN or an infinity is written as null."""
    path = os.environ.get("STORK_METRICS_FILE")
    if not path:
        return
    value = float(value)
    record = {
        "ts": time.time(),
        "job_id": os.environ.get("SLURM_JOB_ID") or "local",
        "rank": _int_env("RANK", 0),
        "host": socket.gethostname(),
        "step": int(step),
        "metric": name,
        # json writes a float as repr() does: it reads back to the same bits.
        "value": value if math.isfinite(value) else None,
        "unit": unit,
        "requeue": _int_env("SLURM_RESTART_COUNT", 0),
        "attempt": _int_env("TORCHELASTIC_RESTART_COUNT", 0),
    }
    # Compact, as storkd writes it: readers pick lines by '"metric":"NAME"'.
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with open(path, "a") as f:
        f.write(line)
        f.flush()


def exit_checkpointed():
    """Exit with STORK_CHECKPOINTED_EXIT (10): this rank's checkpoint is saved."""
    sys.exit(_int_env("STORK_CHECKPOINTED_EXIT", 10))


try:
    install()
except ValueError:
    # Imported outside the main thread: signal.signal() is refused there.
    pass
