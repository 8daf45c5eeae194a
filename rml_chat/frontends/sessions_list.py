"""``rml-chat --sessions`` and ``--delete-session N|NAME``: the autosaved chats, listed or removed, without
loading a model (``core/sessions.py`` keeps the folder)."""

from __future__ import annotations

import argparse
import sys

from ..core.sessions import delete_session, list_sessions, sessions_dir, size_text
from ..terminal import for_stream, json_text
from ..words import counted

HEADER = f"{'N':>3}  {'last written':16}  {'model':32}  {'messages':>8}  {'size':>8}  [name] first message"


def run_sessions(args: argparse.Namespace) -> int:
    if args.delete_session is not None:
        gone = delete_session(args.delete_session)
        line = f"deleted {gone.path.name} ({counted(gone.messages, 'message')}, {size_text(gone.size)} freed)"
        print(for_stream(line, sys.stdout))
        return 0
    sessions = list_sessions()
    if args.json:
        print(json_text({"ok": True, "folder": str(sessions_dir()), "sessions": [
            {"n": n, "file": str(s.path), "when": s.when, "name": s.name, "model": s.model, "messages": s.messages,
             "first_line": s.first_line, "bytes": s.size} for n, s in enumerate(sessions, 1)]}))
        return 0
    if not sessions:
        print(f"no saved chats in {sessions_dir()}")
        return 0
    print(HEADER)
    for n, s in enumerate(sessions, 1):
        print(for_stream(s.line(n), sys.stdout))
    total = sum(s.size for s in sessions)
    print(f"{counted(len(sessions), 'chat')}, {size_text(total)} in {sessions_dir()} · rml-chat --resume N|NAME opens "
          "one, --delete-session N|NAME deletes one")
    return 0
