"""How long the worker's harness takes to read one tensor file (python/d2k_harness.py read_tensor) against the
former way (the file read whole, sliced, then copied into a bytearray). Prints the best of 3 per way.
Usage: python3 bench/harness_read_speed.py [MIB] [FOLDER]   (default 256 MiB of float32 in /dev/shm)"""

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


mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
folder = sys.argv[2] if len(sys.argv) > 2 else "/dev/shm"
t = torch.randn(mib * (1 << 20) // 4)
path = os.path.join(folder, f"d2k-bench-read-{os.getpid()}.d2kt")
h.write_tensor(path, t)
try:
    for name, fn in (("read whole, slice, copy", read_whole), ("read_tensor (one read into the buffer)", h.read_tensor)):
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            r = fn(path, "cpu")
            best = min(best, time.perf_counter() - t0)
        assert torch.equal(r, t)
        print(f"{name:<40} {best:.3f} s for {mib} MiB")
finally:
    os.unlink(path)
