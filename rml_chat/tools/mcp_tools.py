"""``--mcp "COMMAND ARGS"``: the tools of an MCP server over stdio, through the official ``mcp`` SDK (an
optional extra: ``pip install -e ".[mcp]"``).

The SDK is asynchronous; the chat is not. Each server gets a thread of its own running an event loop that
holds the connection (the SDK's ``stdio_client`` and ``ClientSession``); a call is handed to that loop
and its answer waited for, so a call looks like any other tool's. A server that can't be started, does
not answer its handshake in time, or writes on stdout what is not an MCP message before its handshake (the
protocol allows it nothing else there) is one line and leaves its tools out; one that dies mid-session
makes its calls fail, and the failure is the call's result.

Every server started is ended when rml-chat exits, with the processes it started (the SDK ends the
process tree: stdin closed, then terminate, then kill). The SDK's own log (a traceback per bad line) is
shown under ``--verbose`` only.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import shlex
import threading
import weakref
from collections.abc import Callable

from .functions import Tool

START_TIMEOUT_S = 30.0
END_TIMEOUT_S = 10.0  # the SDK's shutdown: 0.5 s to flush, 2 s for the server to leave, 2 s after terminate, 2 after kill

_running: weakref.WeakSet[McpServer] = weakref.WeakSet()  # the servers to end when rml-chat exits


class McpError(Exception):
    """A server that could not be started or listed; str() says why, in one line."""


class McpServer:
    """One MCP server over stdio, its connection held by a thread of its own."""

    def __init__(self, command_line: str, start_timeout: float = START_TIMEOUT_S,
                 sdk_log: Callable[[str], None] | None = None):
        """``sdk_log``: where the SDK's own log lines go (``--verbose``: stderr); None drops them."""
        self.command_line = command_line
        try:
            self.argv = shlex.split(command_line)
        except ValueError as err:
            raise McpError(f"--mcp {command_line}: no command line ({err})") from None
        if not self.argv:
            raise McpError("--mcp: no command given")
        _sdk_log(sdk_log)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main_task: asyncio.Task | None = None
        self._session = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure = ""
        self.listed: list = []
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"mcp {self.argv[0]}")
        _running.add(self)
        self._thread.start()
        if not self._ready.wait(start_timeout):
            self.close()
            raise McpError(f"--mcp {command_line}: the server did not answer within {start_timeout:g} s")
        if self._failure:
            self.close()
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
        self._main_task = asyncio.current_task()
        params = StdioServerParameters(command=self.argv[0], args=self.argv[1:])

        async def transport_fault(message: object) -> None:  # (the SDK hands it notifications too)
            if isinstance(message, Exception) and not self._ready.is_set() and self._main_task is not None:
                self._failure = "it wrote a line on stdout that is not an MCP message (stdout is the protocol's alone)"
                self._main_task.cancel()

        with open(os.devnull, "w") as quiet:  # the server's own log stays off the chat's screen
            async with stdio_client(params, errlog=quiet) as streams, \
                    ClientSession(streams[0], streams[1], message_handler=transport_fault) as session:
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
        """End the connection and the server's processes: a server that answered is asked to leave, one still
        in its handshake is cut off; either way the SDK ends its process tree."""
        _running.discard(self)
        if self._loop is None or not self._thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):  # (a loop already closed)
            if self._session is not None and self._stop is not None:
                self._loop.call_soon_threadsafe(self._stop.set)
            elif self._main_task is not None:
                self._loop.call_soon_threadsafe(self._main_task.cancel)
        self._thread.join(END_TIMEOUT_S)


@atexit.register
def end_all() -> None:
    """End every server still running (rml-chat's exit calls it: its ``os._exit`` runs no atexit handler)."""
    for server in list(_running):
        server.close()


class _SdkLog(logging.Handler):
    """The SDK's log records, handed to ``shown`` (under ``--verbose``) or dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: Callable[[str], None] | None = None
        self.setFormatter(logging.Formatter("mcp: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if self.shown is not None:
            self.shown(self.format(record))


_SDK_LOG = _SdkLog()


def _sdk_log(shown: Callable[[str], None] | None) -> None:
    sdk = logging.getLogger("mcp")
    if _SDK_LOG not in sdk.handlers:
        sdk.addHandler(_SDK_LOG)
        sdk.propagate = False
    _SDK_LOG.shown = shown


def _reason(err: BaseException) -> str:
    """One line for what ended a server: the first leaf of an exception group, its type and message."""
    while getattr(err, "exceptions", None):  # an exception group (anyio's task groups raise them)
        err = err.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(err, FileNotFoundError):
        return f"can't start it ({err.strerror}: {err.filename or 'the command'})"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
