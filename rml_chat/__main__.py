"""``python -m rml_chat``: the same as the ``rml-chat`` command (Ctrl-C while starting up is one line)."""

import sys

try:
    from .frontends.cli import run
except KeyboardInterrupt:
    print("\nrml-chat: interrupted", file=sys.stderr)
    sys.exit(130)
run()
