"""The official MCP Python SDK's client drives the real `d2k mcp` over stdio, in both protocol eras.

Run by ctest (test `mcp_python_client`), which sets D2K_BINARY; run by hand with
    D2K_BINARY=build/src/d2k .venv/bin/python -m pytest -q tests/python_mcp
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the `mcp` package (requirements.txt) is not installed")
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("D2K_BINARY", str(REPO / "build" / "src" / "d2k"))
FIXTURES = Path(os.environ.get("D2K_TEST_FIXTURES", REPO / "tests" / "fixtures"))
TOOLS = ["read_file", "write_file", "edit_file", "list_files", "bash", "evaluate", "submit"]

pytestmark = pytest.mark.skipif(not Path(BINARY).is_file(), reason=f"no d2k binary at {BINARY}")


def server_args(workspace: Path, max_calls: int = 0) -> list[str]:
    args = ["mcp", "--tasks", str(FIXTURES / "base"), "--task", "1", "--workspace", str(workspace)]
    if max_calls:
        args += ["--max-tool-calls", str(max_calls)]
    return args


def params(workspace: Path, max_calls: int = 0) -> StdioServerParameters:
    return StdioServerParameters(command=BINARY, args=server_args(workspace, max_calls))


def text(result) -> str:
    assert len(result.content) == 1
    return result.content[0].text


# "legacy": the initialize handshake; "auto": server/discover first (d2k answers, so the connection is
# stateless 2026-07-28); "2026-07-28": the stateless revision pinned, without a discover probe.
MODES = ["legacy", "auto", "2026-07-28"]


@pytest.mark.parametrize("mode", MODES)
def test_every_tool_prompt_and_resource(tmp_path: Path, mode: str) -> None:
    async def run() -> None:
        async with Client(params(tmp_path), mode=mode) as client:
            session = client.session
            if mode == "legacy":
                assert session.initialize_result is not None
                assert session.initialize_result.protocol_version == "2025-11-25"
                assert session.initialize_result.server_info.name == "d2k"
            elif mode == "auto":
                assert session.discover_result is not None
                assert session.discover_result.supported_versions == ["2026-07-28"]

            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == TOOLS
            assert listed.tools[0].input_schema["required"] == ["path"]

            r = await client.call_tool("write_file", {"path": "sol/solution.py", "content": "x = 1\ny = 2\n"})
            assert not r.is_error, text(r)
            assert (tmp_path / "sol" / "solution.py").read_text() == "x = 1\ny = 2\n"

            r = await client.call_tool("read_file", {"path": "sol/solution.py"})
            assert not r.is_error
            assert text(r) == "     1\tx = 1\n     2\ty = 2\n"

            r = await client.call_tool("edit_file", {"path": "sol/solution.py", "old_string": "y = 2",
                                                     "new_string": "y = 3"})
            assert not r.is_error, text(r)
            assert (tmp_path / "sol" / "solution.py").read_text() == "x = 1\ny = 3\n"

            r = await client.call_tool("edit_file", {"path": "sol/solution.py", "old_string": "nope",
                                                     "new_string": "z"})
            assert r.is_error and "not found" in text(r)

            r = await client.call_tool("list_files", {})
            assert not r.is_error
            assert "sol/solution.py" in text(r) and "12" in text(r)

            r = await client.call_tool("bash", {"command": "echo hi"})
            assert not r.is_error
            assert text(r) == "exit code 0\nhi\n"

            r = await client.call_tool("read_file", {"path": "../escape"})
            assert r.is_error and "outside the workspace" in text(r)

            r = await client.call_tool("read_file", {"path": "x", "bogus": 1})
            assert r.is_error and "unknown argument `bogus`" in text(r)

            # No solution in the workspace yet: both tools say what to write, as an error result.
            for name in ("evaluate", "submit"):
                r = await client.call_tool(name, {})
                assert r.is_error
                assert text(r).startswith("no solution to evaluate")

            prompts = await client.list_prompts()
            assert [p.name for p in prompts.prompts] == ["task"]
            prompt = await client.get_prompt("task")
            prompt_text = prompt.messages[0].content.text
            assert prompt.messages[0].role == "user"
            assert "toy" in prompt_text.lower()

            resources = await client.list_resources()
            assert [str(res.uri) for res in resources.resources] == ["d2k://task/prompt"]
            read = await client.read_resource("d2k://task/prompt")
            assert read.contents[0].text == prompt_text

    anyio.run(run)


@pytest.mark.parametrize("mode", MODES)
def test_unknown_tool_is_a_protocol_error(tmp_path: Path, mode: str) -> None:
    async def run() -> None:
        async with Client(params(tmp_path), mode=mode) as client:
            with pytest.raises(mcp.MCPError) as e:
                await client.call_tool("no_such_tool", {})
            assert e.value.code == -32602

    anyio.run(run)


@pytest.mark.parametrize("mode", MODES)
def test_tool_call_budget(tmp_path: Path, mode: str) -> None:
    async def run() -> None:
        async with Client(params(tmp_path, max_calls=2), mode=mode) as client:
            assert not (await client.call_tool("list_files", {})).is_error
            assert not (await client.call_tool("bash", {"command": "true"})).is_error
            r = await client.call_tool("list_files", {})
            assert r.is_error
            assert "budget exhausted" in text(r)

    anyio.run(run)


def test_raw_stdio_parse_errors_and_old_revision(tmp_path: Path) -> None:
    """Malformed lines get -32700 and the server keeps going; an older handshake revision is kept."""
    lines = [
        "{this is not json",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                               "clientInfo": {"name": "raw", "version": "0"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "bash", "arguments": {"command": "echo raw"}}}),
    ]
    proc = subprocess.run([BINARY, *server_args(tmp_path)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == 3, proc.stdout  # the notification gets no answer; stdout holds protocol only
    assert out[0]["error"]["code"] == -32700 and out[0]["id"] is None
    assert out[1]["result"]["protocolVersion"] == "2025-03-26"
    assert out[2]["result"]["content"][0]["text"] == "exit code 0\nraw\n"
    assert "d2k mcp:" in proc.stderr
