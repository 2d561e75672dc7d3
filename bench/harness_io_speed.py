"""How long the worker's harness takes to write and read one tensor file (python/d2k_harness.py write_tensor,
read_tensor): in one thread, and in 64 MiB chunks on the I/O threads (what the harness does on 4 cores or more);
the read also against the first way (the file read whole, sliced, then copied into a bytearray). On a GPU the
tensor written comes from the device, as the reference's and the solution's outputs do. Best of 3 per way.
Usage: python3 bench/harness_io_speed.py [MIB] [FOLDER]   (default 512 MiB of float64 in /dev/shm)"""

import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

import d2k_harness as h  # noqa: E402


def read_whole(path, device):
    with open(path, "rb") as f:
        data = f.read()
    code, ndim = struct.unpack_from("<ii", data, 8)
    shape = list(struct.unpack_from(f"<{ndim}q", data, 16))
    dt = h.torch_dtype(h.DTYPES[code])
    raw = torch.frombuffer(bytearray(data[16 + 8 * ndim:]), dtype=torch.uint8)
    return raw.view(dt).reshape(shape).to(device)


def best_of(fn, *args):
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        r = fn(*args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, r


mib = int(sys.argv[1]) if len(sys.argv) > 1 else 512
folder = sys.argv[2] if len(sys.argv) > 2 else "/dev/shm"
device = "cuda" if torch.cuda.is_available() else "cpu"
t = torch.randn(mib * (1 << 20) // 8, dtype=torch.float64, device=device)
path = os.path.join(folder, f"d2k-bench-io-{os.getpid()}.d2kt")
threads = max(4, min(8, os.cpu_count() or 1))
print(f"{mib} MiB of float64 from {device}, {folder}, {os.cpu_count()} cores")
try:
    for label, n in (("one thread", 1), (f"{threads} I/O threads", threads)):
        h.IO_THREADS = n
        s, _ = best_of(h.write_tensor, path, t)
        print(f"write_tensor, {label:<16} {s:.3f} s  {mib / 1024 / s:.2f} GiB/s", flush=True)
    for label, n in (("one thread", 1), (f"{threads} I/O threads", threads)):
        h.IO_THREADS = n
        s, r = best_of(h.read_tensor, path, device)
        assert torch.equal(r, t)
        print(f"read_tensor,  {label:<16} {s:.3f} s  {mib / 1024 / s:.2f} GiB/s", flush=True)
    s, r = best_of(read_whole, path, device)
    assert torch.equal(r, t)
    print(f"read whole, slice, copy        {s:.3f} s  {mib / 1024 / s:.2f} GiB/s")
finally:
    os.unlink(path)
