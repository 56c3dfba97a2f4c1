#!/usr/bin/env bash
# A Docker daemon for the docker sandbox tests: Debian's docker.io, started here (not by
# systemd), and a base image built from Debian packages with no container registry.
#
#   image="$(bash .ci/docker.sh start)"   # prints the base image's tag on stdout, nothing else
#   bash .ci/docker.sh stop               # stops the daemon this script started, by its pid
#
# start: installs docker.io (and debootstrap) when missing; when a daemon already answers on
# the socket it is used and left alone, otherwise dockerd starts in the background (overlay2;
# this machine has cgroup v1) with its pid in $TRIALKIT_DOCKERD_PIDFILE, and is waited for at
# most 60 s. The base image is a `debootstrap --variant=minbase` root filesystem of Debian
# bookworm with python3 (so Python agents run in it), from the apt source this machine
# already uses, imported with `docker import`: about 40 s the first time, then kept by the
# daemon (its tag names a hash of the recipe, so a changed recipe builds a new one).
# stop: SIGTERM to that pid, SIGKILL after 20 s; nothing when this script started no daemon.
# Needs root.
set -euo pipefail

pidfile=${TRIALKIT_DOCKERD_PIDFILE:-/tmp/trialkit-ci-dockerd.pid}
log_file=${TRIALKIT_DOCKERD_LOG:-/tmp/trialkit-ci-dockerd.log}
suite=bookworm
packages=python3

log() { echo "docker.sh: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "run me as root (I install Debian's docker.io and start dockerd)"
  exit 1
fi

stop() {
  [ -s "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  rm -f "$pidfile"
  # only the dockerd this script started: the pid must still be a dockerd
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != dockerd ]; then
    return 0
  fi
  log "stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  log "dockerd (pid $pid) did not stop in 20 s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

mirror() {
  # The first Debian archive this machine's apt uses (deb822 sources or sources.list).
  local uri
  uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' |
    grep -v security | head -n 1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
      awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' |
      grep -v security | head -n 1 || true)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

start() {
  if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    log "installing docker.io and debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null
  fi
  if docker version >/dev/null 2>&1; then
    log "a Docker daemon already answers: using it, not stopping it"
  else
    log "starting dockerd (log: $log_file)"
    setsid dockerd --storage-driver overlay2 </dev/null >"$log_file" 2>&1 &
    echo $! >"$pidfile"
    local waited=0
    until docker version >/dev/null 2>&1; do
      if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        log "dockerd exited; the end of its log:"
        tail -n 20 "$log_file" >&2
        exit 1
      fi
      if [ "$waited" -ge 600 ]; then
        log "dockerd did not answer in 60 s"
        stop
        exit 1
      fi
      sleep 0.1
      waited=$((waited + 1))
    done
  fi
  local source tag
  source=$(mirror)
  tag="trialkit-base:$suite-$(echo "$suite minbase $packages $source" | sha256sum | cut -c1-12)"
  if ! docker image inspect "$tag" >/dev/null 2>&1; then
    log "building $tag: debootstrap $suite from $source, then docker import"
    local root
    root=$(mktemp -d /tmp/trialkit-base.XXXXXX)
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$source" \
      >"$root.log" 2>&1; then
      tail -n 20 "$root.log" >&2
      exit 1
    fi
    rm -f "$root.log"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/sh"]' - "$tag" >/dev/null
    rm -rf "$root"
  fi
  echo "$tag"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *)
    log "usage: docker.sh [start|stop]"
    exit 2
    ;;
esac
