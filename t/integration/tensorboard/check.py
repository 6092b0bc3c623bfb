#!/usr/bin/python3
"""Read a run's TensorBoard files as TensorBoard would, and check them.

usage: check.py RUN_DIR FILES_PER_RANK

Every record's framing and both masked CRC32Cs are checked with Debian's
python3-crc32c (an implementation of its own), every Event is parsed with
Google's protobuf library through TensorBoard's schema (compiled with
protoc: TensorBoard's own files when STORK_TENSORBOARD_PROTO_DIR names a
copy of its sources, else events.proto beside this file), and every
train_loss line of each rank's metrics JSONL must be a scalar of that
rank's files at its step, with its value as a float32. Each rank directory
holds FILES_PER_RANK files of the daemons (one per attempt); rank 0's
first starts with the configuration as text, and its last text "exit"
holds the run's reason. Prints what it found.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import crc32c


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        blob = f.read()
    at = 0
    while at < len(blob):
        assert at + 12 <= len(blob), f"{path}: a cut header at {at}"
        head = blob[at:at + 8]
        (length,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        assert head_crc == masked(head), f"{path}: bad length CRC at {at}"
        data = blob[at + 12:at + 12 + length]
        assert len(data) == length, f"{path}: a cut record at {at}"
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        assert data_crc == masked(data), f"{path}: bad data CRC at {at}"
        yield data
        at += 16 + length


def event_class():
    out = tempfile.mkdtemp()
    own = os.environ.get("STORK_TENSORBOARD_PROTO_DIR")
    if own:
        protos = [f"tensorboard/compat/proto/{n}.proto" for n in
                  ("event", "summary", "histogram", "tensor", "resource_handle",
                   "tensor_shape", "types")]
        subprocess.run(["protoc", "-I", own, "--python_out", out, *protos], check=True)
        sys.path.insert(0, out)
        from tensorboard.compat.proto import event_pb2
        print("schema: TensorBoard's own, from", own)
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run(["protoc", "-I", here, "--python_out", out, "events.proto"], check=True)
        sys.path.insert(0, out)
        import events_pb2 as event_pb2
        print("schema: events.proto (TensorBoard's field numbers)")
    return event_pb2.Event


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    run_dir, per_rank = sys.argv[1], int(sys.argv[2])
    Event = event_class()
    ranks = sorted(glob.glob(os.path.join(run_dir, "tensorboard", "rank-*")))
    assert ranks, "no tensorboard/rank-* directory"
    checked = 0
    for rank_dir in ranks:
        rank = int(rank_dir.rsplit("-", 1)[1])
        files = sorted(glob.glob(os.path.join(rank_dir, "events.out.tfevents.*")))
        scalars, texts, daemon_files = {}, [], 0
        for path in files:
            events = [Event.FromString(r) for r in records(path)]
            assert events[0].file_version == "brain.Event:2", path
            values = [v for e in events[1:] for v in e.summary.value]
            daemon_files += not (len(values) == 1 and values[0].tag == "exit")
            for e in events[1:]:
                for v in e.summary.value:
                    if v.WhichOneof("value") == "simple_value":
                        scalars.setdefault(v.tag, {})[e.step] = v.simple_value
                    else:
                        assert v.metadata.plugin_data.plugin_name == "text", v
                        assert v.tensor.dtype == 7 and not v.tensor.tensor_shape.dim, v
                        texts.append((v.tag, v.tensor.string_val[0].decode()))
        assert daemon_files == per_rank, f"{rank_dir}: {daemon_files} daemons' files"
        want = {}
        with open(os.path.join(run_dir, "logs", f"rank-{rank:03d}.metrics.jsonl")) as f:
            for line in f:
                m = json.loads(line)
                if m["metric"] == "train_loss":
                    want[m["step"]] = m["value"]
        got = scalars.get("train_loss", {})
        for step, value in want.items():
            assert step in got, f"rank {rank}: no train_loss at step {step}"
            assert got[step] == f32(value), f"rank {rank} step {step}: {got[step]} != {value}"
        checked += len(want)
        if rank == 0:
            assert texts and texts[0][0] == "config" and "run:" in texts[0][1], texts[:1]
            ends = [t for tag, t in texts if tag == "exit"]
            assert ends, "no exit text in rank 0's files"
            print("rank 0: exit:", ends[-1])
        print(f"rank {rank}: {len(files)} files, {len(want)} train_loss steps, "
              f"tags {sorted(scalars)}")
    assert checked, "no train_loss anywhere"
    print("train_loss steps checked:", checked)


main()
