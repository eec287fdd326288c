# Helpers shared by scripts/bench-compare and scripts/bench-failover (sourced, not run).
# The caller sets `work` (a scratch directory) and the array `pids` (servers to stop on exit).

# A TCP port nobody listens on, from a range away from the usual ones.
free_port() {
  local port
  while true; do
    port=$((20000 + RANDOM % 20000))
    if ! ss -Htln "sport = :$port" | grep -q .; then
      echo "$port"
      return
    fi
  done
}

# Waits (up to 20 s) for a line matching $2 in file $1.
wait_for_line() {
  for _ in $(seq 200); do
    if grep -q "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "bench: timed out waiting for '$2' in $1" >&2
  cat "$1" >&2
  return 1
}

# A 3-server NATS JetStream cluster on loopback (servers bench-0..2, data under $work/nats-cI).
# Sets nats_urls (the comma list of client URLs) and nats_args_I (each server's arguments, for
# nats_server_start I after a kill); waits until the JetStream meta group has a leader.
nats_cluster_start() {
  local client_ports=() route_ports=() routes=""
  nats_urls=""
  for i in 0 1 2; do
    client_ports+=("$(free_port)")
    route_ports+=("$(free_port)")
  done
  for i in 0 1 2; do
    routes+="${routes:+,}nats://127.0.0.1:${route_ports[$i]}"
    nats_urls+="${nats_urls:+,}nats://127.0.0.1:${client_ports[$i]}"
  done
  for i in 0 1 2; do
    mkdir -p "$work/nats-c$i"
    printf -v "nats_args_$i" '%s' "-js -a 127.0.0.1 -p ${client_ports[$i]} -n bench-$i \
--cluster_name bench --cluster nats://127.0.0.1:${route_ports[$i]} --routes $routes \
-sd $work/nats-c$i"
    nats_server_start "$i"
  done
  for i in 0 1 2; do wait_for_line "$work/nats-c$i.log" "Server is ready"; done
  # An R3 stream can be created only once the JetStream meta group has a leader.
  for _ in $(seq 300); do
    if grep -q "JetStream cluster new metadata leader\|Self is new JetStream cluster metadata leader" \
      "$work"/nats-c*.log; then
      return 0
    fi
    sleep 0.1
  done
  echo "bench: the NATS cluster elected no JetStream leader" >&2
  return 1
}

# Starts (again) server $1 of nats_cluster_start; its pid goes to nats_pid_$1 and to pids.
nats_server_start() {
  local args_var="nats_args_$1"
  # shellcheck disable=SC2086 # the arguments are words
  nats-server ${!args_var} >>"$work/nats-c$1.log" 2>&1 &
  printf -v "nats_pid_$1" '%s' "$!"
  pids+=($!)
}
