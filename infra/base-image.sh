#!/usr/bin/env bash
# Builds the local base image for infra/'s Dockerfiles offline, from Debian's packages alone:
#   debootstrap --variant=minbase <suite> ROOTFS <this machine's Debian mirror>
#   tar -C ROOTFS -c . | docker import - autopilot/base:<suite>-<snapshot date>
# and tags it autopilot/base:<suite> too. Nothing is pulled from an image registry.
#
# The mirror is read from this machine's apt configuration at run time (never written here),
# and so is the image's apt configuration: containers reach the package archives the host
# reaches. Certificates the host added to its trust store (/usr/local/share/ca-certificates)
# are trusted in the image too, so pip reaches the Python registry the way the host does.
#
# Cached by the Debian snapshot date (the Date of the mirror's Release file as apt last saw
# it): when autopilot/base:<suite>-<date> exists, nothing is done. Prints the image's tag.
#
# Usage: infra/base-image.sh [SUITE]          (default bookworm; needs root, debootstrap, docker)
set -euo pipefail

SUITE="${1:-bookworm}"
REPO_NAME="${AUTOPILOT_BASE_REPO:-autopilot/base}"

die() { echo "base-image: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap)"
command -v debootstrap >/dev/null || die "debootstrap not installed (apt-get install debootstrap)"
command -v docker >/dev/null || die "docker not installed"

mirror="$(apt-get indextargets --format '$(REPO_URI)' "Codename: $SUITE" 'Identifier: Packages' \
  2>/dev/null | head -n1)"
[ -n "$mirror" ] || die "no Debian mirror for $SUITE in this machine's apt configuration (run apt-get update)"

# The snapshot date: the Date field of the suite's Release file as apt fetched it.
release="$(apt-get indextargets --format '$(FILENAME)' "Codename: $SUITE" 'Identifier: Packages' \
  | head -n1 | sed -E 's#_main_binary-[^/]*_Packages(\.[a-z0-9]+)?$#_InRelease#')"
stamp=""
if [ -f "$release" ]; then
  stamp="$(sed -n 's/^Date: //p' "$release" | head -n1)"
fi
[ -n "$stamp" ] || die "no Release date for $SUITE (run apt-get update)"
date_tag="$(date -u -d "$stamp" +%Y%m%d)"
tag="$REPO_NAME:$SUITE-$date_tag"

if docker image inspect "$tag" >/dev/null 2>&1; then
  docker tag "$tag" "$REPO_NAME:$SUITE"
  echo "$tag"
  exit 0
fi

work="$(mktemp -d /var/tmp/autopilot-base.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "base-image: debootstrap $SUITE (snapshot $date_tag) into $rootfs" >&2
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$rootfs" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }

# The host's apt sources (all suites: updates, security) replace debootstrap's single line.
if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null || [ -s /etc/apt/sources.list ]; then
  rm -f "$rootfs/etc/apt/sources.list"
  [ -s /etc/apt/sources.list ] && cp /etc/apt/sources.list "$rootfs/etc/apt/sources.list"
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && cp "$f" "$rootfs/etc/apt/sources.list.d/"
  done
fi
# The host's extra trusted certificates.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed"
fi
# As in Debian's official images: no recommends, no caches, no docs.
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CONF'
APT::Install-Recommends "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
CONF
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/"*.bin

tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' --change 'CMD ["bash"]' \
  - "$tag" >/dev/null
docker tag "$tag" "$REPO_NAME:$SUITE"
echo "$tag"
