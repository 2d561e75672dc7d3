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
