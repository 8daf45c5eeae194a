"""The engines: the ``Engine`` protocol (base), llama.cpp in process (local, over runtime's C calls), a llama-server (server).
May import the standard library, ``rml_chat.errors``, ``rml_chat.terminal`` (llama.cpp's log on a terminal) and llama.cpp's
bindings (in runtime.py alone); nothing else of rml_chat.
"""
