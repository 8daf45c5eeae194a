#!/usr/bin/env bash
# The speed benches on a machine with an NVIDIA GPU and no network, from the kit that
# `python scripts/device_kit.py` packed into .device/ (docs/performance.md, "On a GPU").
#
#   bash scripts/device_bench.sh [build|tools|speculative|all]     (default: all; OUT= where logs go)
#
# build: llama.cpp with CUDA (llama-bench, llama-simple, llama-batched-bench, llama-server, the lookup
#        tools scripts/cluster.py expects beside it, and the libraries llama_cpp loads; about 5 minutes on
#        16 cores, once), the kit's wheels and llama_cpp set up with those libraries, and a random-weight
#        1.07 B F16 model. All of it goes to .device-work/, beside the kit, so a new copy of the kit (a
#        second call that carries it again) leaves it be.
# tools: bench_llama_tools.py (decode, prompt evaluation, -np 1/4/8 against llama.cpp's own tools).
# speculative: bench_speculative.py on the GPU: the n-gram types and the model as its own draft.
# CUDA=off builds for the CPU instead, and SIZE=tiny makes a 3 M model (to try the script without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=.device
WORK=.device-work
OUT=${OUT:-$WORK/out}
WHAT=${1:-all}
mkdir -p "$OUT" $WORK
BUILD=$WORK/build
SITE=$WORK/site
SIZE=${SIZE:-1b}
MODEL=$WORK/m$SIZE.gguf
if [ "${CUDA:-on}" = on ]; then GPU_FLAGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90}"; NGL=99; else GPU_FLAGS=""; NGL=0; fi

build() {
    if [ ! -f $BUILD/done ]; then
        rm -rf $WORK/src && mkdir -p $WORK/src && tar xJf $KIT/llama.cpp.tar.xz -C $WORK/src
        generator=$(command -v ninja >/dev/null && echo "-G Ninja" || true)
        # shellcheck disable=SC2086  # (the flags are words)
        cmake -S $WORK/src -B $BUILD $generator $GPU_FLAGS -DGGML_RPC=ON -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON \
            -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON \
            -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DCMAKE_BUILD_TYPE=Release \
            > "$OUT/build.log" 2>&1
        cmake --build $BUILD -j "$(nproc)" --target llama mtmd llama-bench llama-simple llama-batched-bench \
            llama-server ggml-rpc-server llama-lookup-create llama-lookup >> "$OUT/build.log" 2>&1
        touch $BUILD/done
    fi
    if [ ! -f $SITE/done ]; then
        rm -rf $SITE
        mkdir -p $SITE  # (a wheel is a zip of what it installs: no pip needed there)
        python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
            $SITE $KIT/wheels/*.whl
        cp -r $KIT/llama_cpp $SITE/llama_cpp
        mkdir -p $SITE/llama_cpp/lib
        cp -P $BUILD/bin/*.so* $SITE/llama_cpp/lib/
        touch $SITE/done
    fi
    [ -f $MODEL ] || env PYTHONPATH="$SITE" python3 scripts/random_model.py $KIT/vocab.gguf $MODEL --size $SIZE
}

tools() {
    python3 scripts/bench_llama_tools.py $MODEL --tools $BUILD/bin --ngl $NGL --tokens 256 --prompt 2048 \
        | tee "$OUT/llama_tools.txt"
}

speculative() {
    python3 scripts/bench_speculative.py $MODEL --ngl $NGL --threads 4 --rounds 1 --model-draft $MODEL \
        --tasks rewrite,chat --types ngram-map-k4v,ngram-mod | tee "$OUT/speculative.txt"
}

export PYTHONPATH="$PWD:$SITE" RML_LLAMA_BIN="$PWD/$BUILD/bin"
case $WHAT in
    build) build ;;
    tools) tools ;;
    speculative) speculative ;;
    all) build; tools; speculative ;;
    *) echo "usage: bash scripts/device_bench.sh [build|tools|speculative|all]" >&2; exit 2 ;;
esac
