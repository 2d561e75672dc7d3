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
