"""A stand-in for an external agent CLI (Claude Code, Codex): it reads the MCP configuration that
`d2k agent run --agent-cmd` wrote, starts the d2k server from it with the official MCP Python SDK's client,
writes a solution and submits it. Used by tests/agent_loop/agent_cli_test.cpp.

usage: fake_agent.py MCP_CONFIG SOLUTION_FILE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


async def main(config_path: str, solution_path: str) -> int:
    server = json.loads(Path(config_path).read_text())["mcpServers"]["d2k"]
    params = StdioServerParameters(command=server["command"], args=server["args"])
    async with Client(params, mode="legacy") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        print("tools:", tools, flush=True)
        r = await client.call_tool("write_file", {"path": "solution.py", "content": Path(solution_path).read_text()})
        print("write_file:", r.content[0].text, flush=True)
        if r.is_error:
            return 3
        r = await client.call_tool("submit", {})
        print("submit:", r.content[0].text, flush=True)
        return 0 if not r.is_error else 4


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2]))
