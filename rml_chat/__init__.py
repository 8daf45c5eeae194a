"""rml-chat: the terminal chat app (wires our tokenizer to llama.cpp). See README.md and docs/design.md.

engines/ (the seam to llama.cpp) <- core/ (model, session, reply) <- frontends/ (cli, repl, batch, check);
beside them tools/ (function and MCP tools), doctor/ (--check) and models/ (-hf, --models: a name to a path);
errors.py, terminal.py, text_input.py and words.py are shared by all.
"""
