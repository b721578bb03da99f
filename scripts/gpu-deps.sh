#!/usr/bin/env bash
# Run HERE (Debian 12), before using the GPU machine: downloads the .deb files of the libraries
# that machine lacks (libsndfile, soxr, CLI11, stb and their codecs) and unpacks them into
# .deps/root, which the device call carries (carry: [".deps/root"]). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .deps/root/usr/include/sndfile.h ] && [ -f .deps/root/usr/include/gloo/algorithm.h ] && exit 0
mkdir -p .deps/debs && cd .deps/debs
apt-get download libsndfile1 libsndfile1-dev libsoxr0 libsoxr-dev libcli11-dev libstb-dev libstb0 \
  libflac12 libvorbis0a libvorbisenc2 libogg0 libopus0 libmpg123-0 libmp3lame0 libgloo-dev
cd .. && for f in debs/*.deb; do dpkg -x "$f" root; done
echo "gpu-deps: unpacked into $(pwd)/root"
