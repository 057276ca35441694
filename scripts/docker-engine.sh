#!/usr/bin/env bash
# Starts a Docker engine for the tests when none answers, and stops only the one it started.
#   scripts/docker-engine.sh start        start dockerd (root) unless an engine already answers
#   scripts/docker-engine.sh stop         stop the dockerd this script started, if any
#   scripts/docker-engine.sh run -- CMD   start, run CMD, stop what was started; CMD's exit code
# Without root or without dockerd it says why and does nothing: the docker tests then fail with
# the reason (or skip with ALLOW_MISSING_TOOLS=1).
set -uo pipefail

STATE_DIR="${AUTOPILOT_DOCKERD_STATE:-/run/autopilot-dockerd}"
PIDFILE="$STATE_DIR/dockerd.pid"
LOG="$STATE_DIR/dockerd.log"

engine_up() { timeout 20 docker info >/dev/null 2>&1; }

start() {
  if engine_up; then
    return 0
  fi
  if ! command -v dockerd >/dev/null; then
    echo "docker-engine: dockerd not installed (make setup installs docker.io)" >&2
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "docker-engine: no engine answers and starting one needs root" >&2
    return 0
  fi
  mkdir -p "$STATE_DIR"
  # Own session, so the engine outlives nothing but this script's own stop.
  setsid dockerd >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 60); do
    if engine_up; then
      echo "docker-engine: started dockerd (pid $(cat "$PIDFILE"); $(docker info --format \
        '{{.Driver}}, cgroup v{{.CgroupVersion}}' 2>/dev/null))" >&2
      return 0
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      echo "docker-engine: dockerd exited: $(tail -n 3 "$LOG" | tr '\n' ' ')" >&2
      rm -f "$PIDFILE"
      return 0
    fi
    sleep 1
  done
  echo "docker-engine: dockerd did not answer within 60 s (log: $LOG)" >&2
}

stop() {
  [ -f "$PIDFILE" ] || return 0
  pid="$(cat "$PIDFILE")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$PIDFILE"
  echo "docker-engine: stopped the dockerd it started (pid $pid)" >&2
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  run)
    shift
    [ "${1:-}" = "--" ] && shift
    started=0
    # A pid file whose engine is gone was left by a run that was killed: not an engine.
    if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      rm -f "$PIDFILE"
    fi
    [ -f "$PIDFILE" ] || { start; [ -f "$PIDFILE" ] && started=1; }
    "$@"
    rc=$?
    [ "$started" -eq 1 ] && stop
    exit "$rc"
    ;;
  *) echo "usage: $0 start|stop|run -- CMD..." >&2; exit 2 ;;
esac
