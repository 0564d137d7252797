# Sourced by gpu_check.sh and device_scaling.sh (from the repository root, with TOOL set to the caller's name):
# picks the interpreter that has torch (PYTHON, else python, else python3) and, where .whl/ holds wheels
# (carried to the GPU machine, see gpu_prepare.sh), installs them into a temporary target put first on
# PYTHONPATH (nothing else is installed); then puts the repository itself on PYTHONPATH (no build).
# The wheels are for CPython 3.12 on manylinux x86-64 (the GPU machine's); elsewhere (the CPU forms' tests on
# another Python) a wheel this interpreter cannot install, such as ale-py's cp312 build, is left out and named.
# The target is GPU_CHECK_SITE, else a fresh temporary folder (two runs never install into one), removed at the
# caller's exit.
if [ -z "${PYTHON:-}" ]; then  # the interpreter that has torch (on the GPU machine: python3)
    for PYTHON in python python3; do
        "$PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null && break
    done
fi
if compgen -G ".whl/*.whl" >/dev/null; then
    if [ -n "${GPU_CHECK_SITE:-}" ]; then
        SITE="$GPU_CHECK_SITE"
    else
        SITE="$(mktemp -d "${TMPDIR:-/tmp}/${TOOL}_site.XXXXXX")"
        trap 'rm -rf "$SITE"' EXIT  # the caller runs its Python in this shell (no exec), then exits
    fi
    start=$SECONDS
    # each wheel, with '+' if this interpreter supports one of its tags, else '-'
    mapfile -t tagged < <("$PYTHON" - .whl/*.whl <<'EOF'
import os, sys
try:
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename
except ImportError:  # pip's own copy
    from pip._vendor.packaging.tags import sys_tags
    from pip._vendor.packaging.utils import parse_wheel_filename
supported = set(sys_tags())
for path in sys.argv[1:]:
    print(("+" if supported & parse_wheel_filename(os.path.basename(path))[3] else "-") + path)
EOF
    )
    wheels=() left=()
    for w in "${tagged[@]}"; do
        if [ "${w:0:1}" = "+" ]; then wheels+=("${w:1}"); else left+=("${w:1}"); fi
    done
    [ "${#tagged[@]}" -gt 0 ] || { echo "$TOOL: reading the tags of .whl/*.whl with $PYTHON failed"; exit 1; }
    if [ "${#left[@]}" -gt 0 ]; then
        echo "$TOOL: left out ${#left[@]} carried wheel(s) built for another Python: ${left[*]#.whl/}"
    fi
    if [ "${#wheels[@]}" -gt 0 ]; then
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
            "${wheels[@]}" 2>&1 | grep -v -e "is ignored: it is neither" -e "Running pip as the 'root' user" >&2
        [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "$TOOL: installing .whl/*.whl into $SITE failed"; exit 1; }
    fi
    echo "$TOOL: installed ${#wheels[@]} carried wheels into $SITE ($((SECONDS - start)) s)"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
