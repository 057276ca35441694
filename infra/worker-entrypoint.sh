#!/bin/sh
# Entrypoint of the worker image. As the image's user (the default), it runs the command.
# Started as root (`user: "0"` with the SYS_ADMIN capability, as the compose worker and the
# docker work pool do), it first removes Docker's masks over /proc (/proc/kcore, /proc/sys...):
# the kernel lets an unprivileged user namespace mount a fresh /proc, which bubblewrap needs,
# only while the container's /proc is fully visible. Then it drops to the autopilot user for
# good: no capabilities, an empty bounding set, no_new_privs. (`docker run --security-opt
# systempaths=unconfined` does the same without root, but neither compose 1.29 nor the Docker
# API that prefect-docker uses can ask for it.)
set -eu
#
# As in the official images, a variable NAME_FILE=/run/secrets/x becomes NAME=<the file's
# content>, read while still root (secret files are often readable by root alone).
if [ "$(id -u)" -eq 0 ]; then
  for name in $(env | sed -n 's/^\([A-Z0-9_]*\)_FILE=.*/\1/p'); do
    eval "file=\${${name}_FILE}"
    # shellcheck disable=SC2154
    value="$(cat "$file")" || { echo "autopilot-entrypoint: cannot read ${name}_FILE" >&2; exit 1; }
    export "$name=$value"
    unset "${name}_FILE"
  done
fi
if [ "$(id -u)" -eq 0 ] && [ "${AUTOPILOT_STAY_ROOT:-0}" != "1" ]; then
  export HOME=/home/autopilot USER=autopilot LOGNAME=autopilot
  if [ "${AUTOPILOT_UNMASK_PROC:-1}" = "1" ]; then
    # Deepest first; a path that cannot be unmounted (no SYS_ADMIN) is left as it is.
    awk '$5 ~ "^/proc/" {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || true
    done
  fi
  exec setpriv --reuid=autopilot --regid=autopilot --init-groups \
    --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"
fi
exec "$@"
