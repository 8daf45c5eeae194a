"""Models by name: ``-hf ORG/REPO[:QUANT]`` from the Hugging Face hub, and the models already on this machine
(the Hugging Face cache, llama.cpp's cache, LM Studio's folder, ollama's store) listed and opened by name.
Each turns a name into a path the loader reads; nothing here loads a model.
May import ``tokenizer`` (a GGUF's metadata and chat format, for the listing) and rml_chat's shared modules.
"""
