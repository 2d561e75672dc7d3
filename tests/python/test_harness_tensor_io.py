"""The harness's tensor files (python/d2k_harness.py write_tensor, read_tensor): round trips of every dtype this
torch has, and damaged files refused with a harness error rather than read as garbage. Needs torch."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import d2k_harness as h  # noqa: E402


@pytest.mark.parametrize("name", [n for n in h.DTYPES if hasattr(torch, n)])
def test_round_trip(tmp_path, name):
    dt = getattr(torch, name)
    x = (torch.arange(24, dtype=torch.float32) - 7).reshape(2, 3, 4)
    x = (x > 0) if dt == torch.bool else x.to(dt)
    p = tmp_path / "t.d2kt"
    h.write_tensor(str(p), x)
    y = h.read_tensor(str(p), "cpu")
    assert y.dtype == dt and y.shape == x.shape
    assert torch.equal(y.view(torch.uint8) if dt.is_floating_point else y, x.view(torch.uint8) if dt.is_floating_point else x)


def test_empty_and_scalar(tmp_path):
    for x in (torch.empty(0, 5), torch.tensor(3.5)):
        p = tmp_path / "t.d2kt"
        h.write_tensor(str(p), x)
        y = h.read_tensor(str(p), "cpu")
        assert y.shape == x.shape and torch.equal(y, x)


@pytest.mark.parametrize("damage", ["truncated", "trailing", "magic", "ndim"])
def test_damaged_files_are_refused(tmp_path, damage):
    p = tmp_path / "t.d2kt"
    h.write_tensor(str(p), torch.ones(1000))
    data = bytearray(p.read_bytes())
    if damage == "truncated":
        data = data[:-4]
    elif damage == "trailing":
        data += b"\0"
    elif damage == "magic":
        data[0] ^= 0xFF
    else:
        data[12:16] = (99).to_bytes(4, "little")
    p.write_bytes(bytes(data))
    with pytest.raises(h.HarnessError):
        h.read_tensor(str(p), "cpu")


@pytest.mark.parametrize("n", [1, 4096, 4097, 3 * 4096 + 5])
def test_chunked_round_trip(tmp_path, monkeypatch, n):
    """Tensors larger than one I/O chunk are written and read by several threads, chunk by chunk."""
    monkeypatch.setattr(h, "IO_CHUNK", 4096)
    monkeypatch.setattr(h, "IO_THREADS", 4)  # threads even on a small machine
    x = torch.randn(n, dtype=torch.float64)
    p = tmp_path / "t.d2kt"
    h.write_tensor(str(p), x)
    assert p.stat().st_size == 16 + 8 + 8 * n
    assert torch.equal(h.read_tensor(str(p), "cpu"), x)
    h.write_tensor(str(p), torch.ones(3))  # rewriting a file truncates it
    assert torch.equal(h.read_tensor(str(p), "cpu"), torch.ones(3))


def test_chunked_read_refuses_a_short_file(tmp_path, monkeypatch):
    monkeypatch.setattr(h, "IO_CHUNK", 64)
    monkeypatch.setattr(h, "IO_THREADS", 4)
    p = tmp_path / "t.d2kt"
    h.write_tensor(str(p), torch.ones(1000))
    data = p.read_bytes()
    p.write_bytes(data[:-100])
    with pytest.raises(h.HarnessError):
        h.read_tensor(str(p), "cpu")


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the pinned staging path is not run")


@needs_cuda
@pytest.mark.parametrize("n", [1, 4096, 3 * 4096 + 5])
@pytest.mark.parametrize("threads", [1, 4])
def test_device_round_trip_through_pinned_staging(tmp_path, monkeypatch, n, threads):
    """Device tensors go file <-> pinned buffer <-> device in pieces smaller than a chunk, on the I/O threads."""
    monkeypatch.setattr(h, "IO_CHUNK", 4096)
    monkeypatch.setattr(h, "STAGING", 1024)
    monkeypatch.setattr(h, "IO_THREADS", threads)
    x = torch.randn(n, dtype=torch.float64, device="cuda")
    p = tmp_path / "t.d2kt"
    h.write_tensor(str(p), x * 2)  # written on the current stream just before: the copy must wait for it
    y = h.read_tensor(str(p), "cuda")
    assert y.is_cuda and y.shape == x.shape
    assert torch.equal(y, x * 2)
    assert torch.equal(h.read_tensor(str(p), "cpu"), (x * 2).cpu())


@needs_cuda
def test_device_read_does_not_race_queued_work(tmp_path):
    """The block read_tensor fills may have just been freed by work still queued on the caller's stream."""
    p = tmp_path / "t.d2kt"
    ref = torch.arange(1 << 20, dtype=torch.float32)
    h.write_tensor(str(p), ref)
    for _ in range(3):
        a = torch.ones(1 << 20, device="cuda")
        for _ in range(200):  # a queue of kernels that still writes a's block when it is freed
            a.mul_(1.0001)
        del a
        y = h.read_tensor(str(p), "cuda")
        torch.cuda.synchronize()
        assert torch.equal(y.cpu(), ref)
