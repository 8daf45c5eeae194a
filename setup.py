"""The one thing pyproject.toml cannot say with every setuptools: the optional C merge loops.

``tokenizer.accel._cmerge`` (tokenizer/accel/_cmerge*.c) runs stages/bpe.py's short-word merge loops and reads
GGUF string arrays in C (what it buys: docs/performance.md). It is optional: where it does not compile, the
install goes on and the reference loops in Python give the same ids.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tokenizer.accel._cmerge",
            sources=["tokenizer/accel/_cmerge.c", "tokenizer/accel/_cmerge_scored.c", "tokenizer/accel/_cmerge_ranked.c",
                     "tokenizer/accel/_cmerge_gguf.c", "tokenizer/accel/_cmerge_table.c"],
            depends=["tokenizer/accel/_cmerge.h"],
            optional=True,
        )
    ]
)
