#!/usr/bin/env bash
# A real two-node Ray cluster for the Ray executor tests, in a network namespace of its own
# that has only a loopback interface: Ray binds some of its servers to the machine's external
# address even when told 127.0.0.1, and tests send traffic to loopback only. Prints the
# cluster's address on stdout (and nothing else there). The tests must run in the same
# namespace:
#
#   address="$(bash .ci/ray.sh)"
#   ip netns exec trialkit-ray env TRIALKIT_TEST_RAY_ADDRESS="$address" \
#     TRIALKIT_TEST_RAY_HIDDEN=/tmp/trialkit-ray-hidden python -m pytest ...
#
# The head node has no CPUs, so every actor runs on the second node, which stands in for
# another machine: it has its own temporary folder (/tmp/ray-second), a resource `second`,
# and its own mount namespace in which $TRIALKIT_TEST_RAY_HIDDEN is an empty tmpfs: a suite
# the tests write there is invisible to its actors unless trialkit ships it.
#
# Needs root (ip netns, unshare) and Ray installed (pip install -e ".[ray]"). Usage statistics
# are off. `bash .ci/ray.sh stop` stops both nodes and removes the namespace.
set -euo pipefail

namespace=${TRIALKIT_RAY_NETNS:-trialkit-ray}
port=${TRIALKIT_RAY_PORT:-6379}
hidden=${TRIALKIT_TEST_RAY_HIDDEN:-/tmp/trialkit-ray-hidden}
second_cpus=${TRIALKIT_RAY_SECOND_CPUS:-2}
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
# A home of Ray's own: a ~/.ray/auth_token that a local `ray.init()` of this user left behind
# turns on token authentication in a new head node, which then refuses the second node.
export HOME="${TRIALKIT_RAY_HOME:-/tmp/trialkit-ray-home}"
mkdir -p "$HOME"
listening() { ip netns exec "$namespace" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; }
if ! listening; then
  log "starting a Ray head node (no CPUs) on 127.0.0.1:$port in namespace $namespace"
  ip netns exec "$namespace" ray start --head --node-ip-address=127.0.0.1 --port="$port" \
    --num-cpus=0 --include-dashboard=false --disable-usage-stats >&2
  log "starting the second node ($second_cpus CPUs), which cannot see $hidden"
  mkdir -p "$hidden"
  # `ray start` returns once its daemons run; they keep the mount namespace made here.
  ip netns exec "$namespace" unshare --mount --propagation private bash -c '
    mount -t tmpfs trialkit-hidden "$1" && shift && exec "$@"' _ "$hidden" \
    ray start --address="127.0.0.1:$port" --node-ip-address=127.0.0.1 \
    --num-cpus="$second_cpus" --resources='{"second": 1}' --temp-dir=/tmp/ray-second \
    --dashboard-agent-listen-port=52366 --disable-usage-stats >&2
fi
echo "127.0.0.1:$port"
