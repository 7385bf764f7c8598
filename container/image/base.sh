#!/usr/bin/env bash
# The image's base layer: a minimal Debian root filesystem (debootstrap --variant=minbase) of this
# machine's release, with the given runtime packages and the unprivileged user `lmx` (uid/gid
# 1000), without apt lists, documentation, man pages, locales or device nodes.
# Cached as an uncompressed layer tar keyed on everything that goes into it; prints its path.
# usage: base.sh PACKAGE...
# env:   LMX_IMAGE_CACHE (default ~/.cache/lmx-image), LMX_DEBIAN_MIRROR (default: deb.debian.org)
set -euo pipefail
cache=${LMX_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lmx-image}
mirror=${LMX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The binaries are built here, so the base must be this machine's Debian release (same glibc).
# shellcheck disable=SC1091
suite=$(. /etc/os-release && [[ ${ID:-} == debian ]] && echo "${VERSION_CODENAME:-}") || true
if [[ -z $suite ]]; then
  echo "base.sh: this machine is not Debian (/etc/os-release); the image's base must be the" \
    "release the binaries were built on" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "base.sh: debootstrap is not installed (scripts/setup.sh)" >&2; exit 1; }

packages=$(printf '%s\n' "$@" | sort -u | paste -sd, -)
key=$( { echo "$suite $mirror $packages"; cat "$0"; } | sha256sum | cut -c1-16)
out="$cache/base-$suite-$key.tar"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9  # two builds at once (cpu and cuda) make the base once
if [[ -s $out ]]; then
  echo "$out"
  exit 0
fi

root=$(mktemp -d "$cache/rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "base.sh: debootstrap $suite ($mirror) with: ${packages:-nothing more}" >&2
log="$cache/debootstrap.log"
if ! debootstrap --variant=minbase ${packages:+--include="$packages"} "$suite" "$root" "$mirror" \
  >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "base.sh: debootstrap failed (whole log: $log)" >&2
  exit 1
fi

chroot "$root" useradd --uid 1000 --user-group --create-home --shell /usr/sbin/nologin lmx
# What a running server never reads. Copyright files stay (the packages' licences).
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "${root:?}"/usr/share/{man,info,locale,lintian,linda}/* \
  "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
  "${root:?}"/var/log/* "${root:?}"/dev/* "$root"/etc/hostname "$root"/etc/resolv.conf
# The container runtime provides /dev, /etc/hosts and /etc/resolv.conf.

chmod 755 "$root"  # the layer's "." entry becomes the image's /
tar --numeric-owner --sort=name -C "$root" -cf "$out.tmp" .
mv "$out.tmp" "$out"
find "$cache" -maxdepth 1 -name 'base-*.tar' -not -newer "$out" -not -path "$out" -atime +30 -delete
echo "base.sh: cached $out ($(du -h "$out" | cut -f1))" >&2
echo "$out"
