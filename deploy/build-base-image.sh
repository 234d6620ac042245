#!/usr/bin/env bash
# Build a Python 3.11 base image from Debian's own packages, for machines that cannot pull
# the official python image (no registry access, a locked-down network). Needs root,
# debootstrap and a Docker engine; reaches only Debian's package mirror.
#
#   deploy/build-base-image.sh [IMAGE]        (default: fastworker-base:bookworm)
#   docker build --build-arg BASE_IMAGE=fastworker-base:bookworm --target subworker .
#
# The host's CA bundle is copied into the image, so pip and uv inside it trust whatever the
# host trusts (a TLS-intercepting proxy's CA included).
set -euo pipefail
image="${1:-fastworker-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT

debootstrap --variant=minbase \
    --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$rootfs" "$mirror" >&2
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
# What an image does not need: package caches, docs, man pages.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*

tar -C "$rootfs" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["python3"]' \
    - "$image" >/dev/null
echo "$image"
