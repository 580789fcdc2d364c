#!/bin/sh
# deploy/docker/install.sh VENV [EXTRAS]: every real step of the images'
# builds (Dockerfile, Dockerfile.gpu), also run as it is by tests/packaging.
#
# From the source tree this script is in: makes sure a Python 3.11+ with venv
# is there (apt-get on a Debian/Ubuntu base such as nvidia/cuda's), builds the
# bullpen wheel, installs it with EXTRAS (e.g. dashboard, gpu, gpu,torch) into
# a new venv at VENV, versions pinned by requirements.txt, and with the
# dashboard extra collects the static files (hashed, compressed) into
# BULLPEN_STATIC_ROOT (default: VENV/../static).
#
# PYTHON: the interpreter (default python3); BULLPEN_WHEEL_DIR: keep the built
# wheel there (default: a temporary directory, removed).
set -eu

venv=${1:?usage: install.sh VENV [EXTRAS]}
extras=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}

# --- a Python 3.11+ that can make venvs ---
python_ok() {
    "$python" -c 'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' \
        2>/dev/null
}
if ! python_ok && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        python3 python3-venv ca-certificates >/dev/null
    rm -rf /var/lib/apt/lists/*
fi
if ! python_ok; then
    echo "install.sh: $python is not a Python 3.11+ with venv and ensurepip" >&2
    exit 1
fi

# --- the wheel, from this source tree ---
wheels=${BULLPEN_WHEEL_DIR:-}
if [ -z "$wheels" ]; then
    wheels=$(mktemp -d)
    trap 'rm -rf "$wheels"' EXIT
fi
mkdir -p "$wheels"
rm -f "$wheels"/bullpen-*.whl
"$python" -m venv "$venv"
"$venv/bin/pip" wheel -q --no-deps --wheel-dir "$wheels" "$src"
wheel=$(ls "$wheels"/bullpen-*.whl)

# --- installed with the pinned versions (constraints carry no extras) ---
constraints="$wheels/constraints.txt"
sed 's/\[[^]]*\]//' "$src/requirements.txt" >"$constraints"
"$venv/bin/pip" install -q -c "$constraints" "$wheel${extras:+[$extras]}"

# --- static files, for the dashboard ---
case ",$extras," in
*,dashboard,*)
    BULLPEN_STATIC_ROOT=${BULLPEN_STATIC_ROOT:-$(dirname "$venv")/static}
    export BULLPEN_STATIC_ROOT
    # collectstatic needs the settings, which need a secret key; this one
    # signs nothing and is gone with this command.
    DJANGO_SECRET_KEY=collectstatic-only-$(date +%s)-not-a-secret \
        "$venv/bin/bullpen" collectstatic --noinput -v 0
    echo "install.sh: static files collected into $BULLPEN_STATIC_ROOT"
    ;;
esac
echo "install.sh: bullpen${extras:+[$extras]} installed into $venv"
