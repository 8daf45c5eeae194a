"""The engines: the ``Engine`` protocol (base), llama.cpp in process (local, over runtime's C calls), a llama-server (server).
May import the standard library, ``rml_chat.errors`` and llama.cpp's bindings (in runtime.py alone); nothing else of rml_chat.
"""
