# Shared paths and helpers for the lab's commands; sourced, never run.
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$LAB_DIR/versions.env"
# --- The lab instance: several labs run side by side, each with its own run directory and port range. ------------
# Chosen by `--instance N` as a command's first argument, else LAB_INSTANCE, else 0. Instance 0 is lab/.run with the
# ports below; instance N (1..29) is lab/.run-N with every port + 100*N. Nothing else is shared between instances but
# the build cache, which is only read once built (lab/build takes a lock while it writes).
if [ "${1:-}" = --instance ] || [ "${1:-}" = -i ]; then
  LAB_INSTANCE=${2:-}
  shift 2 || shift $#
fi
LAB_INSTANCE=${LAB_INSTANCE:-0}
case $LAB_INSTANCE in
  [0-9]|[12][0-9]) ;;
  *) echo "[lab] error: lab instance '$LAB_INSTANCE': use a number from 0 to 29 (--instance N or LAB_INSTANCE=N)" >&2; exit 2 ;;
esac
LAB_INSTANCE=$((10#$LAB_INSTANCE))
# Exported: whatever a lab command starts (components, hooks, lab/ tools it calls) acts on the same instance.
export LAB_INSTANCE
if [ "$LAB_INSTANCE" = 0 ]; then
  RUN_DIR=${HYBRID_LAB_RUN_DIR:-$LAB_DIR/.run}
else
  RUN_DIR=${HYBRID_LAB_RUN_DIR:-$LAB_DIR/.run-$LAB_INSTANCE}
fi
PORT_OFFSET=$(( 100 * LAB_INSTANCE ))
CACHE_ROOT=${HYBRID_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-drill-lab}
CACHE_KEY=$(sha256sum "$LAB_DIR/versions.env" | cut -c1-16)
BIN_DIR=$CACHE_ROOT/$CACHE_KEY/bin
SRC_DIR=$CACHE_ROOT/$CACHE_KEY/src
# A lab component that sources this file (the host firewall stand-in, the hooks it calls) acts as the identity lab/up
# gave it (LAB_IDENTITY_KUBECONFIG); everything else as the lab's admin.
export KUBECONFIG=${LAB_IDENTITY_KUBECONFIG:-$RUN_DIR/kubeconfig}
ADMIN_KUBECONFIG=$RUN_DIR/kubeconfig

# Drops every inherited descriptor but stdio. Whatever lab/up or lab/restart starts outlives the caller, and a kept
# descriptor of a flock (the e2e lock held by `flock ... lab/restart`) would block every end-to-end test for as long
# as that component runs.
close_inherited_fds() {
  local fd
  for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null
  done
  return 0
}

log() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- Process bookkeeping, ports and common waits (used by up/down/status/smoke/node-fail/node-recover) ---
PKI_DIR=$RUN_DIR/pki
PID_DIR=$RUN_DIR/pids
LOG_DIR=$RUN_DIR/logs
CRD_DIR=$CACHE_ROOT/$CACHE_KEY/crds
KWOK_STAGES_DIR=$CACHE_ROOT/$CACHE_KEY/kwok-stages
LAB_CONTEXT=hybrid-lab
# Non-default ports, all on 127.0.0.1, so the lab never collides with a real cluster or another local tool.
# Instance N adds 100*N to each: no two bases differ by a multiple of 100 up to 2,900, so instances 0 to 29 never share
# a port.
ETCD_PORT=$(( 23790 + PORT_OFFSET ))
ETCD_PEER_PORT=$(( 23800 + PORT_OFFSET ))
APISERVER_PORT=$(( 26443 + PORT_OFFSET ))
KCM_PORT=$(( 20257 + PORT_OFFSET ))
SCHEDULER_PORT=$(( 20259 + PORT_OFFSET ))
KWOK_PORT=$(( 20247 + PORT_OFFSET ))
KARPENTER_METRICS_PORT=$(( 20080 + PORT_OFFSET ))
KARPENTER_HEALTH_PORT=$(( 20081 + PORT_OFFSET ))
TOKEN_WEBHOOK_PORT=$(( 20443 + PORT_OFFSET ))
# The Prometheus parts drills talk to: Alertmanager (silences) and the Pushgateway (metrics), at their usual ports + 20000.
ALERTMANAGER_PORT=$(( 29093 + PORT_OFFSET ))
PUSHGATEWAY_PORT=$(( 29091 + PORT_OFFSET ))
# The service's last tier (lab/last-tier-stand-in), where the inference gateway fails over when no GPU serves.
LAST_TIER_PORT=$(( 29097 + PORT_OFFSET ))
# --- Object storage: versitygw, the S3-compatible server run directories are shipped to (lab/up's block of its own).
S3_PORT=$(( 28070 + PORT_OFFSET ))
# versitygw itself listens here; clients reach it on S3_PORT through lab/s3-lock-stand-in, which stamps the bucket's
# default retention on each new object as S3 does.
S3_BACKEND_PORT=$(( 28071 + PORT_OFFSET ))
S3_BUCKET=hybrid-drill-evidence
# The bucket's default retention (compliance mode), longer than the retention the tests ship with (1d), as a real
# evidence bucket's default can be: an upload asking for less must not shorten it.
S3_DEFAULT_RETENTION_DAYS=2
# Its root access key, made by lab/up for this instance: AWS_ACCESS_KEY_ID=... and AWS_SECRET_ACCESS_KEY=... lines,
# as `--s3-credentials` reads them.
S3_CREDENTIALS_FILE=$RUN_DIR/s3-credentials
# Prometheus (scrapes the API server and the service stand-in, evaluates lab/prometheus-rules.yml) and the service
# stand-in's metrics (lab/service-stand-in).
PROMETHEUS_PORT=$(( 29090 + PORT_OFFSET ))
SERVICE_PORT=$(( 29092 + PORT_OFFSET ))
# Every port an instance listens on, with the component that owns it (lab/up refuses a port something else holds).
instance_ports() {
  printf '%s\n' "etcd $ETCD_PORT" "etcd $ETCD_PEER_PORT" "token-webhook $TOKEN_WEBHOOK_PORT" \
    "kube-apiserver $APISERVER_PORT" "kube-controller-manager $KCM_PORT" "kube-scheduler $SCHEDULER_PORT" \
    "kwok $KWOK_PORT" "karpenter $KARPENTER_METRICS_PORT" "karpenter $KARPENTER_HEALTH_PORT" \
    "alertmanager $ALERTMANAGER_PORT" "pushgateway $PUSHGATEWAY_PORT" "last-tier $LAST_TIER_PORT" \
    "service $SERVICE_PORT" "prometheus $PROMETHEUS_PORT"
  printf '%s\n' "versitygw $S3_BACKEND_PORT" "s3-lock $S3_PORT"
}
# The pid listening on a port; nothing when the port is free.
port_pid() { # port
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1
}
command_line() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | cut -c1-160; }
# Start order; down stops them in reverse. host-firewall (lab/host-firewall-stand-in), token-webhook
# (lab/token-webhook) and last-tier (lab/last-tier-stand-in) are lab stand-ins, scripts in lab/, not binaries.
# service (lab/service-stand-in) is the stand-in for the inference gateway and its users.
COMPONENTS="etcd token-webhook kube-apiserver kube-controller-manager kube-scheduler kwok karpenter host-firewall alertmanager pushgateway versitygw s3-lock last-tier service prometheus"
STAND_IN_HOST_FIREWALL=$LAB_DIR/host-firewall-stand-in
STAND_IN_TOKEN_WEBHOOK=$LAB_DIR/token-webhook
STAND_IN_SERVICE=$LAB_DIR/service-stand-in
STAND_IN_LAST_TIER=$LAB_DIR/last-tier-stand-in
STAND_IN_S3_LOCK=$LAB_DIR/s3-lock-stand-in
# Karpenter is built from lab/karpenter-kwok/main.go (kwok's main plus instance types that run out of capacity): the
# binary's name carries that file's hash, so a change to it rebuilds Karpenter alone.
KARPENTER_BIN=karpenter-kwok-$(sha256sum "$LAB_DIR/karpenter-kwok/main.go" | cut -c1-12)
# The instance types that have no capacity now, one per line (lab/capacity); read by Karpenter at every launch.
OUT_OF_CAPACITY_FILE=$RUN_DIR/out-of-capacity
# The API server's audit log (lab/audit-policy.yaml): JSON lines, Metadata level, for checking phase boundaries.
AUDIT_LOG=$LOG_DIR/audit.log
# A kubeconfig for the same cluster and context whose user authenticates like an EKS user: an exec plugin
# (lab/exec-credential) issuing short-lived tokens that the token webhook refuses once expired.
EXEC_KUBECONFIG=$RUN_DIR/kubeconfig-exec

# --- The lab profile: how fast the simulated world is. `fast` for tests and CI; `realistic` scales the seed's real
# cluster (minutes of image pull and model load, EC2 boot, real grace periods and tolerations, consolidateAfter 5m).
# Chosen by LAB_PROFILE at lab/up and kept in lab/.run/profile for the lab's life (lab/down, then lab/up to change it).
LAB_PROFILE=${LAB_PROFILE:-$(cat "$RUN_DIR/profile" 2>/dev/null || echo fast)}
case $LAB_PROFILE in
  fast)
    POD_PULL_MS=200 POD_PULL_TEXT=200ms POD_INIT_MS=100 POD_START_MS=100 POD_LOAD_MS=300 POD_LOAD_JITTER_MS=600
    NODE_MONITOR_GRACE=20s NODE_MONITOR_PERIOD=2s NODE_LEASE_SECONDS=20 TOLERATION_SECONDS=30 NODE_EVICTION_RATE=0.5
    CONSOLIDATE_AFTER=10s NODE_REGISTRATION_DELAY=0s KARPENTER_BATCH_IDLE=500ms KARPENTER_BATCH_MAX=3s
    SCRAPE_INTERVAL=2s COLD_START_SECONDS=3 LAST_TIER_LATENCY=0.3 DCGM_COLLECT_SECONDS=2 ;;
  realistic)
    POD_PULL_MS=150000 POD_PULL_TEXT=2m30s POD_INIT_MS=45000 POD_START_MS=3000 POD_LOAD_MS=90000 POD_LOAD_JITTER_MS=150000
    NODE_MONITOR_GRACE=50s NODE_MONITOR_PERIOD=5s NODE_LEASE_SECONDS=40 TOLERATION_SECONDS=300 NODE_EVICTION_RATE=0.1
    CONSOLIDATE_AFTER=5m NODE_REGISTRATION_DELAY=90s KARPENTER_BATCH_IDLE=1s KARPENTER_BATCH_MAX=10s
    SCRAPE_INTERVAL=30s COLD_START_SECONDS=20 LAST_TIER_LATENCY=2 DCGM_COLLECT_SECONDS=30 ;;
  *) echo "[lab] error: LAB_PROFILE=$LAB_PROFILE: use fast or realistic" >&2; exit 2 ;;
esac
# DCGM_COLLECT_SECONDS: how often the DCGM exporter stand-in takes its snapshot (dcgm-exporter collects every 30 s by
# default); fast shortens it as it shortens the scrape.
# Prometheus's scrape (and rule evaluation) interval: 2s fast, 30s realistic (production scrapes every 15-60 s, and
# a rate() needs two samples in its window); LAB_SCRAPE_INTERVAL at lab/up overrides the profile's.
SCRAPE_INTERVAL=${LAB_SCRAPE_INTERVAL:-$SCRAPE_INTERVAL}

kc() { kubectl --kubeconfig "$KUBECONFIG" --context "$LAB_CONTEXT" "$@"; }

pid_of() { cat "$PID_DIR/$1.pid" 2>/dev/null || true; }

# alive COMPONENT: its recorded pid runs and is still our binary or stand-in script (guards against pid reuse).
# A process in the middle of an exec (a stand-in script goes through env and its shebang to python3) shows an empty
# command line for an instant, as a zombie does for good: an empty one is read again before it counts as dead.
alive() {
  local pid cmdline i; pid=$(pid_of "$1")
  [ -n "$pid" ] || return 1
  for i in 1 2 3 4 5; do
    kill -0 "$pid" 2>/dev/null || return 1
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    if [ -n "$cmdline" ]; then
      grep -qF -e "$CACHE_ROOT/" -e "$STAND_IN_HOST_FIREWALL" -e "$STAND_IN_TOKEN_WEBHOOK" -e "$STAND_IN_SERVICE" \
        -e "$STAND_IN_LAST_TIER" -e "$STAND_IN_S3_LOCK" <<<"$cmdline"
      return
    fi
    sleep 0.1
  done
  return 1
}

# started COMPONENT PID: keeps the pid of a component just put in the background and waits (up to 5 s) until that
# fork has exec'd the component: `alive` knows a component by its command line, and the fork still carries the
# script's, so a check made at once could take a component that is starting for one that died.
started() {
  local c=$1 pid=$2 i
  echo "$pid" >"$PID_DIR/$c.pid"
  for i in $(seq 50); do
    alive "$c" && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
}

# stop_components COMPONENT...: TERM them together, wait up to 10 s, KILL survivors; forgets their pids.
stop_components() {
  local c pid pids=() i
  for c in "$@"; do
    if alive "$c"; then
      pid=$(pid_of "$c"); pids+=("$pid")
      log "stopping $c (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for i in $(seq 1 50); do
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=""; done
    [ -z "${pid:-}" ] && break
    sleep 0.2
  done
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then log "pid $pid ignored TERM; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  done
  for c in "$@"; do rm -f "$PID_DIR/$c.pid"; done
}

# wait_until SECONDS WHAT HINT CMD...: polls CMD every second; on timeout prints CMD's last output (the checks below
# print what is wrong) and dies naming WHAT and HINT (where to look).
wait_until() {
  local timeout=$1 what=$2 hint=$3; shift 3
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      "$@" >&2 2>&1 || true
      die "timed out after ${timeout}s waiting for: $what (see $hint)"
    fi
    sleep 1
  done
}

# --- Steady-state checks: each prints what is wrong and returns non-zero -------------------------------------------
names() { kc get "$@" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
# Nodes whose Ready condition is not True, as "name status".
nodes_not_ready() {
  kc get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk -F'|' '$2!="True"{print $1" "($2==""?"NoCondition":$2)}'
}
all_nodes_ready() {
  local bad
  [ -n "$(names nodes)" ] || { echo "no nodes"; return 1; }
  bad=$(nodes_not_ready) || return 1
  [ -z "$bad" ] || { echo "nodes not Ready: $(echo "$bad" | tr '\n' ' ')"; return 1; }
}
# Inference pods as "name|node|ready|deletionTimestamp".
inference_pods() {
  kc -n inference get pods -l app=llm-inference -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.spec.nodeName}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"|"}{.metadata.deletionTimestamp}{"\n"}{end}'
}
# ready_inference_on SELECTOR: how many inference pods are Ready (and not terminating) on nodes matching SELECTOR.
ready_inference_on() {
  local nodes; nodes=$(names nodes -l "$1" | tr '\n' ' ')
  inference_pods | awk -F'|' -v nodes="$nodes" 'BEGIN{n=split(nodes,a," "); for(i=1;i<=n;i++) s[a[i]]=1}
    $3=="True" && $4=="" && ($2 in s){c++} END{print c+0}'
}
inference_on_hybrid() {
  local ready total
  ready=$(ready_inference_on eks.amazonaws.com/compute-type=hybrid) || return 1
  total=$(inference_pods | grep -c . || true)
  [ "$ready" = 4 ] && [ "$total" = 4 ] || { echo "llm-inference: $ready/4 Ready on hybrid nodes, $total pods in total"; return 1; }
}
# The cloud fallback's NodePools: on-demand first (weight 100, GPU limit 16), then Spot.
FALLBACK_POOLS="gpu-fallback gpu-spot"
nodepool_ready() {
  local p s
  for p in $FALLBACK_POOLS; do
    s=$(kc get nodepool "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') || return 1
    [ "$s" = True ] || { echo "NodePool $p Ready=${s:-<none>}"; return 1; }
  done
}
fallback_nodeclaims() { names nodeclaims -l "karpenter.sh/nodepool in (${FALLBACK_POOLS// /,})"; }
# The batch workload (manifests/45-batch.yaml) as "name|node|ready|deletionTimestamp".
batch_pods() {
  kc -n batch get pods -l app=embeddings -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.spec.nodeName}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"|"}{.metadata.deletionTimestamp}{"\n"}{end}'
}
# What else lives on the hybrid nodes: 2 batch pods Ready there, the bare, emptyDir and StatefulSet pods running there.
batch_on_hybrid() {
  local hybrid ready total p out=""
  hybrid=$(names nodes -l eks.amazonaws.com/compute-type=hybrid | tr '\n' ' ')
  ready=$(batch_pods | awk -F'|' -v nodes="$hybrid" 'BEGIN{n=split(nodes,a," "); for(i=1;i<=n;i++) s[a[i]]=1}
    $3=="True" && $4=="" && ($2 in s){c++} END{print c+0}')
  total=$(batch_pods | grep -c . || true)
  [ "$ready" = 2 ] && [ "$total" = 2 ] || out+="batch/embeddings: $ready/2 Ready on hybrid nodes, $total pods in total"$'\n'
  [ "$(kc -n batch get pod gpu-burn-in -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ] ||
    out+="batch: the bare pod gpu-burn-in is not Running (a forced drain deletes it for good: lab/up re-creates it)"$'\n'
  [ "$(kc -n batch get pods -l app=feature-cache -o jsonpath='{.items[*].status.phase}' 2>/dev/null)" = Running ] ||
    out+="batch: the emptyDir pod feature-cache is not Running (alone) on its hybrid node"$'\n'
  [ "$(kc -n batch get pods -l app=vector-index -o jsonpath='{.items[*].status.phase}{range .items[*]}{.metadata.deletionTimestamp}{end}' 2>/dev/null)" = Running ] ||
    out+="batch: the StatefulSet pod vector-index-0 is not Running (alone, not Terminating) on a hybrid node"$'\n'
  [ -z "$out" ] || { printf '%s' "$out"; return 1; }
}
# The policies lab/host-firewall-stand-in enforces, as KIND/NAME.
host_policies() {
  kc get ciliumclusterwidenetworkpolicies.cilium.io,globalnetworkpolicies.crd.projectcalico.org -o name 2>/dev/null || true
}
fallback_nodes() { names nodes -l "karpenter.sh/nodepool in (${FALLBACK_POOLS// /,})"; }
# Everything the drills assume before they start; prints one line per problem.
steady_state_problems() {
  local out="" n
  kc get --raw /readyz >/dev/null 2>&1 || { echo "API server does not answer"; return 1; }
  out+=$(all_nodes_ready)$'\n'
  for n in $(names nodes -l eks.amazonaws.com/compute-type=hybrid); do
    [ "$(kc get node "$n" -o jsonpath='{.spec.unschedulable}')" = true ] && out+="hybrid node $n is cordoned"$'\n'
    [ "$(kc get node "$n" -o jsonpath='{.metadata.labels.kwok\.x-k8s\.io/node}')" = fake ] ||
      out+="hybrid node $n is not managed by kwok (failed with lab/node-fail?)"$'\n'
  done
  [ "$(names nodes -l eks.amazonaws.com/compute-type=hybrid,topology.kubernetes.io/zone=onprem-dc1 | grep -c .)" = 4 ] ||
    out+="expected 4 hybrid nodes in zone onprem-dc1"$'\n'
  out+=$(inference_on_hybrid)$'\n'
  out+=$(batch_on_hybrid)$'\n'
  out+=$(nodepool_ready)$'\n'
  n=$(fallback_nodeclaims | grep -c . || true)
  [ "$n" = 0 ] || out+="NodePools $FALLBACK_POOLS have $n NodeClaims (steady state is 0)"$'\n'
  n=$(fallback_nodes | grep -c . || true)
  [ "$n" = 0 ] || out+="NodePools $FALLBACK_POOLS have $n nodes (steady state is 0)"$'\n'
  n=$(host_policies | tr '\n' ' ')
  [ -z "${n// /}" ] || out+="host-level cut policies present (a drill's leftovers? they cut nodes off): $n"$'\n'
  out=$(printf '%s' "$out" | grep . || true)
  [ -z "$out" ] || { echo "$out"; return 1; }
}
