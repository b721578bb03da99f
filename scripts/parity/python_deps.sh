#!/usr/bin/env bash
# Makes the official Glow-TTS importable under PYTHON: installs the pure-Python packages its text
# front-end needs (Unidecode, inflect and theirs) from WHEELS into PYLIB where they are missing,
# and puts the stand-ins of shims/ there (librosa always, scipy where it is missing; shims/README.md).
#   python_deps.sh PYTHON WHEELS PYLIB     (then PYTHONPATH=PYLIB)
# CYTHON=0 in the environment: Cython is not needed (nothing builds the official MAS: the
# alignment recipe alone reads the official front-end, not its model).
set -euo pipefail
PY=$1 WHEELS=$2 PYLIB=$3
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$PYLIB"
modules=(numpy torch)
[ "${CYTHON:-1}" = 0 ] || modules+=(Cython)
for module in "${modules[@]}"; do
  "$PY" -c "import $module" 2>/dev/null || { echo "python_deps: $PY lacks $module" >&2; exit 1; }
done
missing=()
for pair in unidecode:Unidecode inflect:inflect; do
  PYTHONPATH="$PYLIB" "$PY" -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
  "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" --target "$PYLIB" "${missing[@]}"
fi
rm -rf "$PYLIB/librosa"; cp -r "$HERE/shims/librosa" "$PYLIB/"
"$PY" -c "import scipy.signal, scipy.io.wavfile" 2>/dev/null || { rm -rf "$PYLIB/scipy"; cp -r "$HERE/shims/scipy" "$PYLIB/"; }
PYTHONPATH="$PYLIB" "$PY" -c "import unidecode, inflect, librosa, scipy.signal"
echo "python_deps: ready in $PYLIB (installed: ${missing[*]:-nothing})"
