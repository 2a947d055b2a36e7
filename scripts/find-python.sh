#!/usr/bin/env bash
# Prints the path of a Python ≥ 3.12 on this machine (the Sendspin reference needs it; Debian
# bookworm's own is 3.11): python3.13 or python3.12 on PATH, else one pyenv or /usr/local holds.
set -euo pipefail
is_new_enough() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; }
for candidate in python3.13 python3.12 python3; do
    path=$(command -v "$candidate" 2>/dev/null) || continue
    # A pyenv shim answers for versions it does not select: ask the interpreter for its real path.
    if is_new_enough "$path"; then "$path" -c 'import sys; print(sys.executable)'; exit 0; fi
done
for path in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9]; do
    [ -x "$path" ] && is_new_enough "$path" && { echo "$path"; exit 0; }
done
echo "no Python 3.12 or newer here: install python3.12 (or newer) and run make deps again" >&2
exit 1
