#!/usr/bin/env bash
# A real Ray head node for the Ray executor tests, in a network namespace of its own that has
# only a loopback interface: Ray binds some of its servers to the machine's external address
# even when told 127.0.0.1, and tests send traffic to loopback only. Prints the cluster's
# address on stdout (and nothing else there). The tests must run in the same namespace:
#
#   address="$(bash .ci/ray.sh)"
#   ip netns exec trialkit-ray env TRIALKIT_TEST_RAY_ADDRESS="$address" python -m pytest ...
#
# Needs root (ip netns) and Ray installed (pip install -e ".[ray]"). Usage statistics are off.
# `bash .ci/ray.sh stop` stops the node and removes the namespace.
set -euo pipefail

namespace=${TRIALKIT_RAY_NETNS:-trialkit-ray}
port=${TRIALKIT_RAY_PORT:-6379}
log() { echo "ray.sh: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "run me as root (I make a network namespace)"
  exit 1
fi
command -v ray >/dev/null || { log "ray is not installed: pip install -e '.[ray]'"; exit 1; }
if [ "${1:-}" = "stop" ]; then
  # `ray stop` finds Ray's processes by name, in any namespace.
  ray stop --force >&2
  ip netns delete "$namespace" 2>/dev/null || true
  exit 0
fi
if ! command -v ip >/dev/null; then
  log "installing iproute2 (ip netns)"
  apt-get update -qq >&2 && apt-get install -y -qq iproute2 >&2
fi

if ! ip netns list | grep -qw "$namespace"; then
  ip netns add "$namespace"
fi
ip netns exec "$namespace" ip link set lo up

export RAY_USAGE_STATS_ENABLED=0
listening() { ip netns exec "$namespace" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; }
if ! listening; then
  log "starting a Ray head node on 127.0.0.1:$port in namespace $namespace"
  ip netns exec "$namespace" ray start --head --node-ip-address=127.0.0.1 --port="$port" \
    --num-cpus=4 --include-dashboard=false --disable-usage-stats >&2
fi
echo "127.0.0.1:$port"
