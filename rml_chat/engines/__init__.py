"""The engines: the ``Engine`` protocol (base.py), llama.cpp in process (local.py over runtime.py's C calls,
kv_cache.py's plans and state files) and a llama-server (server.py).
May import the standard library, ``rml_chat.errors`` and llama.cpp's bindings (runtime.py alone); nothing else of rml_chat.
"""
