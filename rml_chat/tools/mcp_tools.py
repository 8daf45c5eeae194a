"""``--mcp "COMMAND ARGS"``: the tools of an MCP server over stdio, through the official ``mcp`` SDK (an
optional extra: ``pip install -e ".[mcp]"``).

The SDK is asynchronous; the chat is not. Each server gets a thread of its own running an event loop that
holds the connection (the SDK's ``stdio_client`` and ``ClientSession``); a call is handed to that loop
and its answer waited for, so a call looks like any other tool's. A server that can't be started, or does
not answer its handshake in time, is one line and leaves its tools out; one that dies mid-session makes
its calls fail, and the failure is the call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import threading

from .functions import Tool

START_TIMEOUT_S = 30.0


class McpError(Exception):
    """A server that could not be started or listed; str() says why, in one line."""


class McpServer:
    """One MCP server over stdio, its connection held by a thread of its own."""

    def __init__(self, command_line: str, start_timeout: float = START_TIMEOUT_S):
        self.command_line = command_line
        self.argv = shlex.split(command_line)
        if not self.argv:
            raise McpError("--mcp: no command given")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure = ""
        self.listed: list = []
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"mcp {self.argv[0]}")
        self._thread.start()
        if not self._ready.wait(start_timeout):
            raise McpError(f"--mcp {command_line}: the server did not answer within {start_timeout:g} s")
        if self._failure:
            raise McpError(f"--mcp {command_line}: {self._failure}")

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as err:  # whatever the SDK or the process raised: the server's failure
            self._failure = self._failure or _reason(err)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        try:
            from mcp import ClientSession, StdioServerParameters, stdio_client
        except ImportError:
            self._failure = 'the mcp SDK is not installed (pip install -e ".[mcp]")'
            return
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        params = StdioServerParameters(command=self.argv[0], args=self.argv[1:])
        with open(os.devnull, "w") as quiet:  # the server's own log stays off the chat's screen
            async with stdio_client(params, errlog=quiet) as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                self.listed = (await session.list_tools()).tools
                self._session = session
                self._ready.set()
                await self._stop.wait()

    def tools(self) -> list[Tool]:
        """The server's tools, each run by a call over the connection."""
        return [Tool(t.name, t.description or "", dict(t.input_schema or {"type": "object"}),
                     lambda arguments, name=t.name: self.call(name, arguments), f"--mcp {self.argv[0]}")
                for t in self.listed]

    def call(self, name: str, arguments: dict) -> str:
        """A tool's result as text (an error the server reports is raised: the call's result says it)."""
        if self._loop is None or self._session is None or not self._thread.is_alive():
            raise McpError("the MCP server is not running")
        future = asyncio.run_coroutine_threadsafe(self._session.call_tool(name, arguments), self._loop)
        result = future.result()
        text = "\n".join(getattr(part, "text", "") for part in result.content if getattr(part, "text", None))
        if result.is_error:
            raise McpError(text or "the server reported an error")
        if text:
            return text
        return json.dumps(result.structured_content, ensure_ascii=False)

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(5)


def _reason(err: BaseException) -> str:
    """One line for what ended a server: the first leaf of an exception group, its type and message."""
    while getattr(err, "exceptions", None):  # an exception group (anyio's task groups raise them)
        err = err.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(err, FileNotFoundError):
        return f"can't start it ({err.strerror}: {err.filename or 'the command'})"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
