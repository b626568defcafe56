#!/usr/bin/env bash
# Builds wirebench's OCI image from this repository alone: a static binary (glibc linked in,
# no loader, no library) in an image FROM scratch whose entry point is `wirebench server`.
# Needs podman or buildah (Debian: apt-get install podman). Prints the image's name last.
#   packaging/image/build.sh                      build the static binary, then the image
#   WIREBENCH_STATIC_BINARY=PATH packaging/image/build.sh    use a static binary already built
# The binary is target/static/x86_64-unknown-linux-gnu/release/wirebench; the image is tagged
# localhost/wirebench:VERSION and :latest, and saved as target/image/wirebench-VERSION.oci.tar.
set -euo pipefail
cd "$(dirname "$0")/../.."
binary="${WIREBENCH_STATIC_BINARY:-}"
if [ -z "$binary" ]; then
  # --target keeps these flags off build scripts and proc macros (they run on the host).
  # getrandom's syscall backend: a static binary cannot find glibc's getrandom(3) with dlsym,
  # and its fallback reads /dev/urandom, which an empty root has not.
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\"" \
    CARGO_TARGET_DIR=target/static \
    cargo build --release --locked --target x86_64-unknown-linux-gnu -p wirebench --bin wirebench >&2
  binary=target/static/x86_64-unknown-linux-gnu/release/wirebench
fi
if ldd "$binary" >/dev/null 2>&1 && ! ldd "$binary" 2>&1 | grep -q 'statically linked'; then
  echo "build.sh: $binary is dynamically linked; an image from scratch needs a static one" >&2
  exit 1
fi
version="$("$binary" --version | awk '{ print $2 }')"
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp packaging/image/Containerfile "$context/"
# Debug information stays in target/; the image carries the stripped binary.
strip -o "$context/wirebench" "$binary"
if command -v podman >/dev/null 2>&1; then
  builder=(podman build)
  save=(podman image save --format oci-archive)
elif command -v buildah >/dev/null 2>&1; then
  builder=(buildah bud)
  save=(buildah push)
else
  echo "build.sh: needs podman or buildah (apt-get install podman)" >&2
  exit 1
fi
name="localhost/wirebench:$version"
"${builder[@]}" --quiet -t "$name" -t localhost/wirebench:latest -f "$context/Containerfile" "$context" >&2
mkdir -p target/image
archive="target/image/wirebench-$version.oci.tar"
rm -f "$archive"
if [ "${save[0]}" = podman ]; then
  "${save[@]}" -o "$archive" "$name" >&2
else
  "${save[@]}" "$name" "oci-archive:$archive" >&2
fi
echo "$archive" >&2
echo "$name"
