"""Drives contextfold's recall tools with the official MCP Python SDK, as an agent's client would.

Usage: recall.py (--url URL [--token TOKEN] | --command PROGRAM ARG...) [--mode auto|legacy]

Reads a JSON list of calls from standard input, each {"tool": NAME, "arguments": {...}}.
Connects, lists the tools, makes the calls in order and prints one JSON object: the tools as
listed ({name, description, input_schema}), and for each call its text, whether it is an
error, and the seconds it took (client to server and back).
"""

import argparse
import asyncio
import json
import sys
import time

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def server(args):
    if args.url:
        headers = {"x-contextfold-token": args.token} if args.token else None
        return streamable_http_client(args.url, http_client=create_mcp_http_client(headers=headers))
    return StdioServerParameters(command=args.command[0], args=args.command[1:])


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    calls = json.load(sys.stdin)
    async with Client(server(args), mode=args.mode) as client:
        listed = await client.list_tools()
        tools = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
            for tool in listed.tools
        ]
        results = []
        for call in calls:
            started = time.perf_counter()
            result = await client.call_tool(call["tool"], call.get("arguments", {}))
            seconds = time.perf_counter() - started
            texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
            results.append({"text": "".join(texts), "blocks": len(result.content),
                            "is_error": bool(result.is_error), "seconds": seconds})
    print(json.dumps({"tools": tools, "results": results}))


asyncio.run(main())
