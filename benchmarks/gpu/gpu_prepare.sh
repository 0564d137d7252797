#!/usr/bin/env bash
# Prepare the GPU check and the scaling run for a GPU machine without network access, on a machine with network
# access: download into .whl/ (git-ignored) the wheels that benchmarks/gpu/gpu_check.sh and
# benchmarks/gpu/device_scaling.sh need and the GPU machine's image lacks, for CPython 3.12 on manylinux x86-64,
# each pinned and listed, none pulled in implicitly; then prove the set complete for Python 3.12 (see "what
# the check proves" below).
#
#   bash benchmarks/gpu/gpu_prepare.sh          # .whl/ (about 3.6 MB), then the commands to run there
#   bash benchmarks/gpu/gpu_prepare.sh DIR      # the same into DIR (tests/test_gpu_check.py)
#
# What the check proves: (1) pip, with no index and this folder alone, finds every pinned wheel for
# CPython 3.12 manylinux x86-64 and would install it (a dry run into a scratch target); (2) every requirement
# of ding_dist (read from this source tree, with its atari extra) and of every carried wheel, with its markers
# evaluated for Python 3.12 on Linux x86-64, is met by a carried wheel (version checked) or by a package of the image's
# list below (version checked where that list records one; the others are printed as assumed); (3) one
# version of each project, so the GPU machine's install of .whl/*.whl cannot stop on two. It does not prove
# that the image holds what its list says; gpu_check.sh fails at once, in one line, if an import is missing there.
# For another image, set GPU_IMAGE_PACKAGES (names) and GPU_IMAGE_VERSIONS (name==version pins) to its packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST="${1:-.whl}"
PY="${PYTHON:-$(command -v python || command -v python3)}"

# The wheels the image lacks (pins: the versions CI tests with). gymnasium needs farama-notifications,
# numpy, cloudpickle and typing-extensions; the image has the last three. ale-py (its ROMs inside, 3.1 MB) is
# for device_scaling.sh's Pong; it needs numpy, and ding_dist's atari extra opencv-python-headless, which the
# image has. gpu_check.sh does not use it: its image-policy rows use a synthetic frame-stack env.
WHEELS=(gymnasium==1.4.0 farama-notifications==0.0.6 easydict==1.14 ale-py==0.12.1)

# The packages the GPU machine's image already has (a CUDA image with torch 2.11 and Python 3.12), and the
# versions known for some of them; GPU_IMAGE_PACKAGES / GPU_IMAGE_VERSIONS replace them.
IMAGE_PACKAGES="${GPU_IMAGE_PACKAGES:-absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas
nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax
opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy
portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson
six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision
tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug
wheel wrapt xarray xxhash yarl zipp}"
IMAGE_VERSIONS="${GPU_IMAGE_VERSIONS:-torch==2.11.0 numpy==2.5.2 triton==3.6.0 jax==0.11.2 safetensors==0.8.0}"

TARGET=(--python-version 3.12 --implementation cp --abi cp312 --only-binary=:all:
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
quiet() { grep -v "is ignored: it is neither a file nor a directory" || true; }  # this machine's pip.conf noise

mkdir -p "$DEST"
rm -f "$DEST"/*.whl  # one version of each: a stale pin would stop the GPU machine's install
"$PY" -m pip download -q --no-deps "${TARGET[@]}" -d "$DEST" "${WHEELS[@]}" 2>&1 | quiet
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# (1) installable from the folder alone for CPython 3.12 manylinux x86-64
"$PY" -m pip install -q --dry-run --no-index --no-deps --find-links "$DEST" "${TARGET[@]}" --target "$scratch/t" \
    --report "$scratch/wheels.json" "${WHEELS[@]}" 2>&1 | quiet
# ding_dist's own requirements, from this source tree (no build isolation: nothing is downloaded)
"$PY" -m pip install -q --dry-run --no-index --no-deps --no-build-isolation --report "$scratch/project.json" . \
    2>&1 | quiet
# (2) and (3)
"$PY" - "$DEST" "$scratch/wheels.json" "$scratch/project.json" "$IMAGE_PACKAGES" "$IMAGE_VERSIONS" "${WHEELS[@]}" <<'EOF'
import json, os, sys, zipfile
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pip's own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

dest, wheels_report, project_report, image_text, versions_text, *pins = sys.argv[1:]
EXTRAS = ("", "atari")  # ding_dist's extras the device runs use (atari: device_scaling.sh's Pong)
marker_env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
              "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
image = {canonicalize_name(n) for n in image_text.split()}
image_versions = {canonicalize_name(p.split("==")[0]): p.split("==")[1] for p in versions_text.split()}
carried = {}
for item in json.load(open(wheels_report))["install"]:
    meta = item["metadata"]
    carried[canonicalize_name(meta["name"])] = (meta["version"], meta.get("requires_dist") or [])
files = sorted(f for f in os.listdir(dest) if f.endswith(".whl"))
names = [canonicalize_name(f.split("-")[0]) for f in files]
problems = [f"two wheels of {n} in {dest}" for n in set(names) if names.count(n) > 1]
problems += [f"{dest} holds {f}, which no pin names" for f, n in zip(files, names) if n not in carried]
project = json.load(open(project_report))["install"][0]["metadata"]
needs = [(f"ding_dist {project['version']}", r, EXTRAS) for r in project.get("requires_dist") or []]
needs += [(f"{name} {version}", r, ("",)) for name, (version, reqs) in carried.items() for r in reqs]
assumed = []
for who, text, extras in needs:
    req = Requirement(text)
    if req.marker is not None and not any(req.marker.evaluate({**marker_env, "extra": e}) for e in extras):
        continue  # another extra, or another Python or platform
    name = canonicalize_name(req.name)
    if name in carried:
        if carried[name][0] not in req.specifier:
            problems.append(f"{who} needs {req}; {dest} carries {name} {carried[name][0]}")
    elif name in image_versions:
        if image_versions[name] not in req.specifier:
            problems.append(f"{who} needs {req}; the image has {name} {image_versions[name]}")
    elif name in image:
        assumed.append(f"{req} ({who})")
    else:
        problems.append(f"{who} needs {req}: neither carried nor on the image; add it to WHEELS")
size = sum(os.path.getsize(os.path.join(dest, f)) for f in files)
for p in problems:
    print(f"gpu_prepare: INCOMPLETE: {p}")
if problems:
    sys.exit(1)
print(f"gpu_prepare: {len(files)} wheels in {dest} ({size / 1e6:.2f} MB): {', '.join(files)}")
print("gpu_prepare: complete for CPython 3.12 manylinux x86-64: every requirement of ding_dist (and its atari extra) "
      "and of the carried wheels is carried or on the image's list")
if assumed:
    print(f"gpu_prepare: on the image, version not recorded (assumed to satisfy): {'; '.join(sorted(set(assumed)))}")
EOF
echo "gpu_prepare: copy $DEST/ with the repository to the GPU machine; there, the GPU check, then the scaling run:"
sed -n 's/^#   DEVICE: //p' benchmarks/gpu/gpu_check.sh benchmarks/gpu/device_scaling.sh
