#!/usr/bin/env bash
# Run HERE (Debian 12), before using the GPU machine: downloads the .deb files of the libraries
# that machine lacks (libsndfile, soxr, CLI11, stb and their codecs, cpp-httplib) and unpacks them
# into .deps/root, and pytest's wheels into .deps/wheels; the device call carries both (carry:
# [".deps/root", ".deps/wheels"]). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! compgen -G ".deps/wheels/pytest-*.whl" > /dev/null; then
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
    -d .deps/wheels pytest
fi
[ -f .deps/root/usr/include/sndfile.h ] && [ -f .deps/root/usr/include/httplib.h ] && exit 0
mkdir -p .deps/debs && cd .deps/debs
apt-get download libsndfile1 libsndfile1-dev libsoxr0 libsoxr-dev libcli11-dev libstb-dev libstb0 \
  libflac12 libvorbis0a libvorbisenc2 libogg0 libopus0 libmpg123-0 libmp3lame0 libgloo-dev \
  libcpp-httplib-dev libcpp-httplib0.11
cd .. && for f in debs/*.deb; do dpkg -x "$f" root; done
echo "gpu-deps: unpacked into $(pwd)/root"
