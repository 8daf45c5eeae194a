"""rml-chat: the terminal chat app (wires our tokenizer to llama.cpp). See README.md."""
