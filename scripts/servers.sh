#!/usr/bin/env bash
# Local throwaway servers for loadgen tests: PostgreSQL 15, MariaDB 10.11 (+HandlerSocket),
# memcached, Redis and Prometheus, all on 127.0.0.1 (PostgreSQL on 127.0.0.2 too), with their
# state under $LOADGEN_STATE.
# PostgreSQL, MariaDB and Redis also listen on a Unix socket there; memcached cannot listen on
# TCP and a socket at once, so memcached_unix is a second memcached, on a socket only.
# TLS: a throwaway CA (and a second, "wrong" one that signed nothing) under $LOADGEN_STATE/tls
# signs one server certificate (localhost, 127.0.0.1, ::1) that PostgreSQL (ssl=on, a role that
# may only log in over TLS), MariaDB (a user REQUIRE SSL) and Redis (a tls-port) present.
#
#   scripts/servers.sh up   [all|postgres|mariadb|memcached|memcached_unix|redis|prometheus]...  install/start/wait (idempotent)
#   scripts/servers.sh down [all|postgres|mariadb|memcached|memcached_unix|redis|prometheus]...  stop what this script started
#   memcached_PORT (e.g. memcached_44212) is one more memcached on 127.0.0.1:PORT, for pools of
#   servers (memcache://h:p1,h:p2,...); up/down/pid/status take it like any name; `down all` stops them too.
#   scripts/servers.sh env          print `export` lines:  eval "$(scripts/servers.sh env)"
#   scripts/servers.sh pid NAME     print the server's main pid
#   scripts/servers.sh status       one line per server
#   scripts/servers.sh tools        install the test tools that are no server (chromium: tests/html.rs, socat: tests/tls.rs, HdrHistogram.jar: tests/merge.rs)
#
# `up` on a server that is stopped (SIGSTOP) or not answering kills it and starts it again;
# after a SIGKILL it just starts it again on the same data.
set -euo pipefail

STATE=${LOADGEN_STATE:-/tmp/loadgen-servers}
PG_PORT=${LOADGEN_PG_PORT:-55432}
MY_PORT=${LOADGEN_MY_PORT:-53306}
HS_PORT=${LOADGEN_HS_PORT:-59998}
HSW_PORT=${LOADGEN_HSW_PORT:-59999}
MC_PORT=${LOADGEN_MC_PORT:-51211}
REDIS_PORT=${LOADGEN_REDIS_PORT:-56379}
REDIS_TLS_PORT=${LOADGEN_REDIS_TLS_PORT:-56380}
PROM_PORT=${LOADGEN_PROM_PORT:-59090}
# The two --metrics ports Prometheus scrapes (the tests' generators listen there).
SCRAPE_A=${LOADGEN_PROM_SCRAPE_A:-59464}
SCRAPE_B=${LOADGEN_PROM_SCRAPE_B:-59465}
START_TIMEOUT=${LOADGEN_START_TIMEOUT:-60}
# Throwaway credentials for these local servers only (also printed by `env`).
PASS=loadgen
HS_SECRET=hs-secret
# Redis: the default user's password (requirepass); the ACL user loadgen has $PASS.
REDIS_PASS=redis-secret
ALL=(postgres mariadb memcached memcached_unix redis prometheus)

say() { echo "servers: $*" >&2; }
die() { say "error: $*"; exit 1; }
pidfile() { echo "$STATE/run/$1.pid"; }
logfile() { echo "$STATE/log/$1.log"; }
comm_of() { case $1 in postgres) echo postgres ;; mariadb) echo mariadbd ;; redis) echo redis-server ;; memcached_unix | memcached_[0-9]*) echo memcached ;; *) echo "$1" ;; esac; }

# Process state letter of a live (non-zombie) process whose comm is $2, or nothing.
proc_state() {
  local pid=$1 stat comm
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) && stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ -z ${2:-} || $comm == "$2" ]] || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != [ZXx] ]] || return 1
  echo "${stat:0:1}"
}
alive() { proc_state "$1" "${2:-}" >/dev/null; }
# Pid from this script's pidfile if that process is still the server it started.
server_pid() {
  local pid
  pid=$(cat "$(pidfile "$1")" 2>/dev/null) || return 1
  alive "$pid" "$(comm_of "$1")" && echo "$pid"
}

# tcp_chat PORT NLINES DATA: send DATA to 127.0.0.1:PORT, print up to NLINES reply lines.
tcp_chat() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf '%s' "$3" >&3
  local i line
  for ((i = 0; i < $2; i++)); do IFS= read -r -t 3 line <&3 || break; printf '%s\n' "${line%$'\r'}"; done
  exec 3>&-
}
export -f tcp_chat
chat() { timeout 5 bash -c 'tcp_chat "$@"' _ "$@" 2>/dev/null; }
# unix_chat PATH NLINES DATA: `chat` over a Unix socket (bash has no /dev/unix; python3 is there).
unix_chat() {
  timeout 5 python3 - "$@" 2>/dev/null <<'EOF'
import socket, sys
path, n, data = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
s.connect(path)
s.sendall(data.encode())
f = s.makefile("rb")
for _ in range(n):
    line = f.readline()
    if not line:
        break
    print(line.decode().rstrip("\r\n"))
EOF
}

pg_bin() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [[ -x $d/postgres ]] && { echo "$d"; return; }
  done
  die "no PostgreSQL server binaries under /usr/lib/postgresql"
}

# ---------------------------------------------------------------- installation
packages_for() {
  case $1 in
    postgres) echo postgresql postgresql-contrib sysbench sysstat openssl ;;  # sysstat: pidstat, the server-CPU check
    mariadb) echo mariadb-server mariadb-client sysbench openssl ;;
    memcached | memcached_unix) echo memcached libmemcached-tools nutcracker ;;  # nutcracker: twemproxy, the proxy bench
    redis) echo redis-server redis-tools openssl ;;
    prometheus) echo prometheus python3-yaml ;;
  esac
}
ensure_packages() {
  local p missing=() created=0 log
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  ((EUID == 0)) || die "missing packages (${missing[*]}) and not root"
  log=$(logfile apt)
  say "installing ${missing[*]} (log: $log)"
  : >"$log"
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then   # keep the distro services from starting
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && created=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  local rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >>"$log" 2>&1 ||
    { apt-get update >>"$log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >>"$log" 2>&1; } ||
    rc=$?
  if ((created)); then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
  if ((rc)); then tail -n 20 "$log" >&2; die "apt-get install ${missing[*]} failed"; fi
}

# ---------------------------------------------------------------- generic start/stop
close_fds() {
  local fd
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    ((fd > 2 && fd != 255)) && eval "exec $fd>&-"
  done
  return 0
}
# launch NAME CMD...: start CMD detached (own session), output to the log, pid to the pidfile.
# Every inherited descriptor above 2 is closed first: a server restarted from a test run under
# `flock LOCK cargo test` would otherwise keep the lock's descriptor, and the lock, for life.
launch() {
  local name=$1; shift
  echo "---- $(date '+%F %T') starting $name" >>"$(logfile "$name")"
  (cd "$STATE" && close_fds && exec setsid "$@") </dev/null >>"$(logfile "$name")" 2>&1 9>&- &
  echo $! >"$(pidfile "$name")"
  disown $!   # no "Killed" job notices from this shell
}
# wait_ready NAME CHECKFN: poll CHECKFN until it succeeds; fail if the server dies or times out.
wait_ready() {
  local name=$1 check=$2 pid deadline=$((SECONDS + START_TIMEOUT))
  pid=$(cat "$(pidfile "$name")")
  until $check; do
    if ! alive "$pid"; then start_failed "$name" "exited during startup"; return 1; fi
    if ((SECONDS >= deadline)); then start_failed "$name" "not ready after ${START_TIMEOUT}s"; return 1; fi
    sleep 0.2
  done
}
start_failed() {   # report, show the log tail, and stop whatever was started
  say "error: $1 $2; last lines of $(logfile "$1"):"
  tail -n 20 "$(logfile "$1")" | sed 's/^/  | /' >&2
  stop_server "$1" KILL
}
# stop_server NAME SIGNAL: signal the recorded pid and wait for it to exit (SIGKILL after 60 s).
stop_server() {
  local name=$1 sig=$2 pid i
  pid=$(server_pid "$name") || { rm -f "$(pidfile "$name")"; return 0; }
  kill -CONT "$pid" 2>/dev/null || true   # a SIGSTOPped process cannot act on the signal
  kill "-$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    say "$name (pid $pid) did not exit after 60s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do alive "$pid" || break; sleep 0.1; done
  fi
  alive "$pid" && die "$name (pid $pid) does not exit"
  rm -f "$(pidfile "$name")"
}
# already_up NAME CHECKFN HUNGSIG: 0 if running and answering; restarts a stopped/hung server.
already_up() {
  local name=$1 check=$2 pid st
  pid=$(server_pid "$name") || return 1
  st=$(proc_state "$pid")
  if [[ $st != [Tt] ]]; then
    $check && return 0
    sleep 1; $check && return 0
  fi
  say "$name (pid $pid) is $([[ $st == [Tt] ]] && echo stopped || echo not answering), restarting it"
  stop_server "$name" "$3"
  return 1
}

# ---------------------------------------------------------------- TLS certificates
# Made once (kept while the files exist): EC P-256, valid ten years. Keys are mode 600; each
# server gets its own copy of the server key, owned by the user it runs as.
TLS_DIR=$STATE/tls
tls_certs() {
  [[ -s $TLS_DIR/server.crt && -s $TLS_DIR/server.key && -s $TLS_DIR/ca.crt && -s $TLS_DIR/wrong-ca.crt ]] && return 0
  local t ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes) log
  log=$(logfile tls)
  t=$(mktemp -d "$STATE/tls.XXXXXX")
  (
    cd "$t" && umask 077
    for ca in ca wrong-ca; do
      openssl req -x509 "${ec[@]}" -keyout "$ca.key" -out "$ca.crt" -days 3650 -subj "/CN=loadgen test $ca"
    done
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj /CN=localhost
    printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1' 'extendedKeyUsage=serverAuth' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 3650 -extfile server.ext
    rm -f server.csr server.ext ca.srl
    chmod 644 ./*.crt
  ) >>"$log" 2>&1 || { rm -rf "$t"; tail -n 20 "$log" >&2; die "openssl could not make the test certificates"; }
  rm -rf "$TLS_DIR" && mv "$t" "$TLS_DIR" && chmod 755 "$TLS_DIR"
  say "made a test CA and server certificate in $TLS_DIR"
}
# tls_copy DIR OWNER: the server certificate and key, in DIR, for a server running as OWNER.
tls_copy() {
  install -m 644 -o "$2" "$TLS_DIR/server.crt" "$1/server.crt"
  install -m 644 -o "$2" "$TLS_DIR/ca.crt" "$1/ca.crt"
  install -m 600 -o "$2" "$TLS_DIR/server.key" "$1/server.key"
}

# ---------------------------------------------------------------- PostgreSQL
PG_DIR=$STATE/postgres
pg_ping() { timeout 5 "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 3; }
# Answering, with TLS on: a server started before TLS was configured is restarted with it.
pg_ping_tls() { pg_ping && [[ $(pg_local -d postgres -Atc 'show ssl' 2>/dev/null) == on ]]; }
# The TLS-only role logs in over TLS (and the certificate verifies as localhost).
pg_tls_login() {
  PGPASSWORD=$PASS PGCONNECT_TIMEOUT=3 PGSSLMODE=verify-full PGSSLROOTCERT=$TLS_DIR/ca.crt timeout 5 "$PGBIN/psql" \
    -X -qAt -h localhost -p "$PG_PORT" -U loadgen_tls -d loadgen -c 'select 1' 2>/dev/null | grep -qx 1
}
pg_local() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_DIR/sock" -p "$PG_PORT" -U postgres "$@"; }
pg_login() {
  PGPASSWORD=$PASS PGCONNECT_TIMEOUT=3 timeout 5 "$PGBIN/psql" -X -qAt -h 127.0.0.1 -p "$PG_PORT" \
    -U loadgen -d loadgen -c 'select 1' 2>/dev/null | grep -qx 1
}
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }

# pg_hba DATADIR: who may log in, and how (rewritten on every `up`, so a server started by an
# older checkout learns new roles' lines).
pg_hba() {
  # loadgen_tls may log in over TLS only: hostssl lets it in, hostnossl rejects it by name.
  # loadgen_cert logs in by client certificate alone: one signed by the test CA whose CN is the role.
  # 127.0.0.2 (loopback, a name the certificate does not carry) shows verify-full's host check.
  printf '%s\n' 'local all postgres trust' 'local all all scram-sha-256' \
    'hostnossl all loadgen_tls 127.0.0.1/32 reject' 'hostssl all loadgen_tls 127.0.0.1/32 scram-sha-256' \
    'hostnossl all loadgen_tls 127.0.0.2/32 reject' 'hostssl all loadgen_tls 127.0.0.2/32 scram-sha-256' \
    'hostssl all loadgen_cert 127.0.0.1/32 cert' \
    'host all all 127.0.0.1/32 scram-sha-256' 'host all all 127.0.0.2/32 scram-sha-256' >"$1/pg_hba.conf"
}
# pg_roles LOG: the roles and grants the tests use (idempotent).
pg_roles() {
  PGOPTIONS="-c client_min_messages=warning" pg_local -d postgres >>"$1" 2>&1 <<EOF
SELECT 'CREATE ROLE loadgen' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'loadgen') \gexec
ALTER ROLE loadgen LOGIN SUPERUSER PASSWORD '$PASS';
SELECT 'CREATE DATABASE loadgen OWNER loadgen' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'loadgen') \gexec
GRANT pg_read_all_stats TO loadgen;
SELECT 'CREATE ROLE loadgen_tls' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'loadgen_tls') \gexec
ALTER ROLE loadgen_tls LOGIN NOSUPERUSER PASSWORD '$PASS';
GRANT pg_read_all_stats TO loadgen_tls;
SELECT 'CREATE ROLE loadgen_cert' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'loadgen_cert') \gexec
ALTER ROLE loadgen_cert LOGIN NOSUPERUSER;
GRANT pg_read_all_stats TO loadgen_cert;
\connect loadgen
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
GRANT USAGE ON SCHEMA public TO loadgen_tls;
GRANT USAGE ON SCHEMA public TO loadgen_cert;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO loadgen_tls, loadgen_cert;
ALTER DEFAULT PRIVILEGES FOR ROLE loadgen IN SCHEMA public GRANT SELECT ON TABLES TO loadgen_tls, loadgen_cert;
EOF
}
up_postgres() {
  PGBIN=$(pg_bin)
  tls_certs
  if already_up postgres pg_ping_tls QUIT; then
    pg_hba "$PG_DIR/data" && pg_local -d postgres -qAtc 'select pg_reload_conf()' >/dev/null && pg_roles "$(logfile postgres)" \
      || { start_failed postgres "refreshing pg_hba.conf and roles failed"; exit 1; }
    say "postgres already up on 127.0.0.1:$PG_PORT (pg_hba.conf and roles refreshed)"
    return
  fi
  local data=$PG_DIR/data log pid
  log=$(logfile postgres)
  mkdir -p "$PG_DIR/sock" && chmod 755 "$STATE" "$PG_DIR" && chown postgres: "$PG_DIR/sock"
  as_postgres test -x "$PG_DIR/sock" || die "postgres user cannot reach $PG_DIR (parent dirs not searchable?)"
  if [[ ! -f $data/PG_VERSION ]]; then
    rm -rf "$data" "$data.tmp" && install -d -o postgres -g postgres -m 700 "$data.tmp"
    (cd "$PG_DIR" && as_postgres "$PGBIN/initdb" -D "$data.tmp" -U postgres -E UTF8 --locale=C.UTF-8 --no-sync \
      --auth-local=trust --auth-host=scram-sha-256) >>"$log" 2>&1 || { start_failed postgres "initdb failed"; exit 1; }
    echo "include 'loadgen.conf'" >>"$data.tmp/postgresql.conf"
    mv "$data.tmp" "$data"
  fi
  cat >"$data/loadgen.conf" <<EOF
listen_addresses = '127.0.0.1,127.0.0.2'
port = $PG_PORT
unix_socket_directories = '$PG_DIR/sock'
max_connections = 1100
shared_buffers = 256MB
fsync = off
synchronous_commit = off
full_page_writes = off
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
ssl = on
ssl_cert_file = 'loadgen-tls/server.crt'
ssl_key_file = 'loadgen-tls/server.key'
ssl_ca_file = 'loadgen-tls/ca.crt'
EOF
  pg_hba "$data"
  chown postgres: "$data/loadgen.conf" "$data/pg_hba.conf"
  install -d -o postgres -m 700 "$data/loadgen-tls" && tls_copy "$data/loadgen-tls" postgres
  # Lock files left by a killed postmaster (its pid may linger as an unreaped zombie).
  pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null) || true
  if [[ -n $pid ]] && ! alive "$pid" postgres; then
    rm -f "$data/postmaster.pid" "$PG_DIR/sock/.s.PGSQL.$PG_PORT" "$PG_DIR/sock/.s.PGSQL.$PG_PORT.lock"
  fi
  # Backends orphaned by a SIGKILLed postmaster take a moment to exit; retry until then.
  for _ in {1..10}; do
    launch postgres setpriv --reuid=postgres --regid=postgres --init-groups -- "$PGBIN/postgres" -D "$data"
    sleep 0.5
    alive "$(cat "$(pidfile postgres)")" && break
    tail -n 5 "$log" | grep -Eq 'still in use|already exists' || break
    sleep 1
  done
  wait_ready postgres pg_ping || exit 1
  pg_roles "$log" || { start_failed postgres "setup SQL failed"; exit 1; }
  wait_ready postgres pg_login || exit 1
  wait_ready postgres pg_tls_login || exit 1
  say "postgres up on 127.0.0.1:$PG_PORT (pid $(cat "$(pidfile postgres)"))"
}

# ---------------------------------------------------------------- MariaDB + HandlerSocket
MY_DIR=$STATE/mariadb
my_root() { env -u MYSQL_PWD timeout 30 mariadb --no-defaults -S "$MY_DIR/mysqld.sock" -u root "$@"; }
my_ping() { env -u MYSQL_PWD timeout 5 mariadb-admin --no-defaults --connect-timeout=3 -S "$MY_DIR/mysqld.sock" -u root ping >/dev/null 2>&1; }
# Answering, with TLS on: a server started before TLS was configured is restarted with it.
my_ping_tls() { my_ping && [[ $(my_root -N -e "select @@have_ssl" 2>/dev/null) == YES ]]; }
my_tls_login() {
  MYSQL_PWD=$PASS timeout 5 mariadb --no-defaults --connect-timeout=3 -h localhost --protocol=tcp -P "$MY_PORT" -u loadgen_tls \
    --ssl --ssl-ca="$TLS_DIR/ca.crt" --ssl-verify-server-cert -N -e 'select 1' loadgen 2>/dev/null | grep -qx 1
}
my_login() {
  MYSQL_PWD=$PASS timeout 5 mariadb --no-defaults --connect-timeout=3 -h 127.0.0.1 -P "$MY_PORT" -u loadgen \
    -N -e 'select 1' loadgen 2>/dev/null | grep -qx 1
}
# HandlerSocket answers on both ports: auth, open index, find (needs the check table).
hs_check() {
  local t=$'\t' want
  want=$(printf '0\t1\n0\t1\n0\t1\tok')
  [[ $(chat "$HS_PORT" 3 "A${t}1${t}$HS_SECRET"$'\n'"P${t}0${t}loadgen_hscheck${t}t${t}PRIMARY${t}v"$'\n'"0${t}=${t}1${t}1"$'\n') == "$want" ]] &&
    [[ $(chat "$HSW_PORT" 3 "A${t}1${t}$HS_SECRET"$'\n'"P${t}0${t}loadgen_hscheck${t}t${t}PRIMARY${t}v"$'\n'"0${t}=${t}1${t}1"$'\n') == "$want" ]]
}

# Users of auth plugins loadgen's wire driver does not speak (tests/mysql_auth.rs): ed25519,
# which it hands to mysql_async, and pam, whose 'dialog' client plugin neither driver speaks
# (the server asks for it before PAM is consulted, so the PAM service need not exist). The
# plugins stay installed (mysql.plugin); the users are made once; both also on a running server.
my_plugin_users() {
  local plugin log
  log=$(logfile mariadb)
  for plugin in ed25519 pam; do
    [[ $(my_root -N -e "SELECT COUNT(*) FROM information_schema.plugins WHERE plugin_name = '$plugin'") == 1 ]] ||
      my_root -e "INSTALL SONAME 'auth_$plugin'" >>"$log" 2>&1 || die "mariadb: cannot install the auth_$plugin plugin (see $log)"
  done
  my_root >>"$log" 2>&1 <<EOF || die "mariadb: cannot create the ed25519 / pam users (see $log)"
CREATE USER IF NOT EXISTS 'loadgen_ed25519'@'127.0.0.1' IDENTIFIED VIA ed25519 USING PASSWORD('$PASS');
CREATE USER IF NOT EXISTS 'loadgen_ed25519'@'localhost' IDENTIFIED VIA ed25519 USING PASSWORD('$PASS');
CREATE USER IF NOT EXISTS 'loadgen_pam'@'127.0.0.1' IDENTIFIED VIA pam USING 'loadgen-none';
GRANT SELECT ON loadgen.* TO 'loadgen_ed25519'@'127.0.0.1', 'loadgen_ed25519'@'localhost', 'loadgen_pam'@'127.0.0.1';
EOF
}

up_mariadb() {
  tls_certs
  already_up mariadb my_ping_tls TERM && {
    my_plugin_users
    say "mariadb already up on 127.0.0.1:$MY_PORT (HandlerSocket $HS_PORT/$HSW_PORT)"
    return
  }
  local data=$MY_DIR/data log
  log=$(logfile mariadb)
  mkdir -p "$MY_DIR"
  if [[ ! -d $data/mysql ]]; then
    rm -rf "$data" "$data.tmp"
    mariadb-install-db --no-defaults --datadir="$data.tmp" --user=root \
      --skip-test-db --skip-name-resolve >>"$log" 2>&1 || { start_failed mariadb "mariadb-install-db failed"; exit 1; }
    mv "$data.tmp" "$data"
  fi
  rm -f "$MY_DIR/mysqld.sock" "$MY_DIR/mariadbd.pid"   # not running, so these are stale
  install -d -m 700 "$MY_DIR/tls" && tls_copy "$MY_DIR/tls" root
  launch mariadb /usr/sbin/mariadbd --no-defaults --user=root --datadir="$data" \
    --port="$MY_PORT" --bind-address=127.0.0.1 --socket="$MY_DIR/mysqld.sock" --pid-file="$MY_DIR/mariadbd.pid" \
    --max-connections=2000 --innodb-buffer-pool-size=512M --innodb-flush-log-at-trx-commit=2 \
    --ssl-cert="$MY_DIR/tls/server.crt" --ssl-key="$MY_DIR/tls/server.key" --ssl-ca="$MY_DIR/tls/ca.crt" \
    --skip-log-bin --local-infile=ON --performance-schema=OFF --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --plugin-load-add=handlersocket.so --plugin-maturity=beta \
    --handlersocket-address=127.0.0.1 --handlersocket-port="$HS_PORT" --handlersocket-port-wr="$HSW_PORT" \
    --handlersocket-threads=2 --handlersocket-threads-wr=1 --handlersocket-verbose=0 \
    --handlersocket-plain-secret="$HS_SECRET" --handlersocket-plain-secret-wr="$HS_SECRET"
  wait_ready mariadb my_ping || exit 1
  my_root >>"$log" 2>&1 <<EOF || { start_failed mariadb "setup SQL failed"; exit 1; }
CREATE DATABASE IF NOT EXISTS loadgen;
CREATE USER IF NOT EXISTS 'loadgen'@'127.0.0.1' IDENTIFIED BY '$PASS';
CREATE USER IF NOT EXISTS 'loadgen'@'localhost' IDENTIFIED BY '$PASS';
GRANT ALL ON loadgen.* TO 'loadgen'@'127.0.0.1', 'loadgen'@'localhost';
GRANT PROCESS, RELOAD ON *.* TO 'loadgen'@'127.0.0.1', 'loadgen'@'localhost';
CREATE USER IF NOT EXISTS 'loadgen_tls'@'%' IDENTIFIED BY '$PASS' REQUIRE SSL;
GRANT SELECT ON loadgen.* TO 'loadgen_tls'@'%';
DROP DATABASE IF EXISTS loadgen_hscheck;
CREATE DATABASE loadgen_hscheck;
CREATE TABLE loadgen_hscheck.t (id INT PRIMARY KEY, v VARCHAR(8)) ENGINE=InnoDB;
INSERT INTO loadgen_hscheck.t VALUES (1, 'ok');
EOF
  wait_ready mariadb my_login || exit 1
  wait_ready mariadb my_tls_login || exit 1
  my_plugin_users
  wait_ready mariadb hs_check || exit 1
  # HandlerSocket keeps tables open while its connections last; ours are closed by now.
  my_root -e 'SET SESSION lock_wait_timeout = 10; DROP DATABASE loadgen_hscheck' >>"$log" 2>&1 ||
    say "warning: could not drop scratch database loadgen_hscheck"
  say "mariadb up on 127.0.0.1:$MY_PORT, HandlerSocket on $HS_PORT (read) / $HSW_PORT (write) (pid $(cat "$(pidfile mariadb)"))"
}

# ---------------------------------------------------------------- memcached
mc_ping() { [[ $(chat "$MC_PORT" 1 $'version\r\n') == VERSION* ]]; }
up_memcached() {
  already_up memcached mc_ping TERM && { say "memcached already up on 127.0.0.1:$MC_PORT"; return; }
  launch memcached memcached -p "$MC_PORT" -l 127.0.0.1 -U 0 -m 1024 -t 2 -c 4096 -u nobody
  wait_ready memcached mc_ping || exit 1
  say "memcached up on 127.0.0.1:$MC_PORT (pid $(cat "$(pidfile memcached)"))"
}

# memcached_PORT: an extra memcached on 127.0.0.1:PORT (a member of a pool), same settings.
up_memcached_port() {
  local name=$1 port=${1#memcached_}
  ((port > 0 && port < 65536)) || die "bad port in '$name' (use memcached_PORT, e.g. memcached_44212)"
  # shellcheck disable=SC2317  # called through wait_ready/already_up
  ping_it() { [[ $(chat "$port" 1 $'version\r\n') == VERSION* ]]; }
  already_up "$name" ping_it TERM && { say "$name already up on 127.0.0.1:$port"; return; }
  launch "$name" memcached -p "$port" -l 127.0.0.1 -U 0 -m 256 -t 2 -c 4096 -u nobody
  wait_ready "$name" ping_it || exit 1
  say "$name up on 127.0.0.1:$port (pid $(cat "$(pidfile "$name")"))"
}

# A second memcached on a Unix socket only (-s turns TCP off). Its directory belongs to nobody,
# the user memcached drops to before it binds the socket; the socket is mode 0700.
MC_SOCK_DIR=$STATE/memcached_unix
MC_SOCK=$MC_SOCK_DIR/memcached.sock
mc_unix_ping() { [[ $(unix_chat "$MC_SOCK" 1 $'version\r\n') == VERSION* ]]; }
up_memcached_unix() {
  already_up memcached_unix mc_unix_ping TERM && { say "memcached_unix already up on $MC_SOCK"; return; }
  install -d -o nobody -m 700 "$MC_SOCK_DIR"
  rm -f "$MC_SOCK"   # not running, so it is stale
  launch memcached_unix memcached -s "$MC_SOCK" -a 0700 -U 0 -m 1024 -t 2 -c 4096 -u nobody
  wait_ready memcached_unix mc_unix_ping || exit 1
  say "memcached_unix up on $MC_SOCK (pid $(cat "$(pidfile memcached_unix)"))"
}

# ---------------------------------------------------------------- Redis
REDIS_DIR=$STATE/redis
REDIS_SOCK=$REDIS_DIR/redis.sock
# Both listeners: a server started before the socket was configured is restarted with it.
redis_ping() {
  [[ $(chat "$REDIS_PORT" 2 "AUTH loadgen $PASS"$'\r\nPING\r\n') == $'+OK\n+PONG' ]] &&
    [[ $(unix_chat "$REDIS_SOCK" 2 "AUTH loadgen $PASS"$'\r\nPING\r\n') == $'+OK\n+PONG' ]] &&
    [[ $(REDISCLI_AUTH=$PASS timeout 5 redis-cli --no-auth-warning --tls --cacert "$TLS_DIR/ca.crt" -h localhost \
      -p "$REDIS_TLS_PORT" --user loadgen ping 2>/dev/null) == PONG ]]
}
up_redis() {
  tls_certs
  already_up redis redis_ping TERM && { say "redis already up on 127.0.0.1:$REDIS_PORT"; return; }
  mkdir -p "$REDIS_DIR" && tls_copy "$REDIS_DIR" root
  # In a file, not on the command line: ps shows command lines. No persistence: a restart is empty.
  (umask 077 && cat >"$REDIS_DIR/redis.conf" <<EOF
bind 127.0.0.1
port $REDIS_PORT
unixsocket $REDIS_SOCK
unixsocketperm 700
tls-port $REDIS_TLS_PORT
tls-cert-file $REDIS_DIR/server.crt
tls-key-file $REDIS_DIR/server.key
tls-ca-cert-file $REDIS_DIR/ca.crt
tls-auth-clients no
dir $REDIS_DIR
save ""
appendonly no
daemonize no
maxclients 4064
requirepass $REDIS_PASS
user loadgen on >$PASS ~* &* +@all
EOF
  )
  launch redis redis-server "$REDIS_DIR/redis.conf"
  wait_ready redis redis_ping || exit 1
  say "redis up on 127.0.0.1:$REDIS_PORT (pid $(cat "$(pidfile redis)"))"
}

# ---------------------------------------------------------------- Prometheus
PROM_DIR=$STATE/prometheus
prom_ping() {
  [[ $(chat "$PROM_PORT" 1 $'GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n') == HTTP/1.?' 200'* ]]
}
up_prometheus() {
  already_up prometheus prom_ping TERM && { say "prometheus already up on 127.0.0.1:$PROM_PORT"; return; }
  mkdir -p "$PROM_DIR/data"
  # The tests' --metrics ports, away from the usual 9464 (docs/metrics.md says why).
  cat >"$PROM_DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: loadgen
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:$SCRAPE_A', '127.0.0.1:$SCRAPE_B']
EOF
  launch prometheus prometheus --config.file="$PROM_DIR/prometheus.yml" --storage.tsdb.path="$PROM_DIR/data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" --web.enable-lifecycle --web.enable-admin-api
  wait_ready prometheus prom_ping || exit 1
  say "prometheus up on 127.0.0.1:$PROM_PORT (pid $(cat "$(pidfile prometheus)"))"
}

# ---------------------------------------------------------------- commands
# Fill the global array `list` from server arguments ("all" or none = every server).
names() {
  local n
  list=()
  (($#)) || set -- all
  for n in "$@"; do
    case $n in
      all)
        list+=("${ALL[@]}")
        # and every extra memcached this script started under this state dir
        for f in "$STATE"/run/memcached_[0-9]*.pid; do [[ -e $f ]] && { f=${f##*/}; list+=("${f%.pid}"); }; done
        ;;
      postgres | mariadb | memcached | memcached_unix | redis | prometheus) list+=("$n") ;;
      memcached_[0-9]*) [[ $n =~ ^memcached_[0-9]+$ ]] || die "unknown server '$n' (use memcached_PORT)"; list+=("$n") ;;
      *) die "unknown server '$n' (use: all ${ALL[*]})" ;;
    esac
  done
  mapfile -t list < <(printf '%s\n' "${list[@]}" | awk '!seen[$0]++')
}
lock_state() {
  mkdir -p "$STATE/run" "$STATE/log"
  exec 9>"$STATE/run/lock"
  flock -w 300 9 || die "another servers.sh holds $STATE/run/lock"
}

cmd=${1:-}
(($#)) && shift
case $cmd in
  up)
    names "$@"
    lock_state
    pkgs=()
    for n in "${list[@]}"; do read -ra p <<<"$(packages_for "${n%%_[0-9]*}")"; pkgs+=("${p[@]}"); done
    ensure_packages "${pkgs[@]}"
    for n in "${list[@]}"; do
      case $n in memcached_[0-9]*) up_memcached_port "$n" ;; *) "up_$n" ;; esac
    done
    ;;
  tools)
    lock_state
    # socat: the TLS terminator in front of loadgen serve (tests/tls.rs); libhdrhistogram-java:
    # Java's HistogramLogProcessor reads an --hdr-log (tests/merge.rs), with a java to run it.
    ensure_packages chromium socat libhdrhistogram-java openjdk-17-jre-headless
    ;;
  down)
    names "$@"
    lock_state
    for n in "${list[@]}"; do
      if pid=$(server_pid "$n"); then
        case $n in postgres) sig=INT ;; *) sig=TERM ;; esac   # postgres: fast shutdown
        stop_server "$n" "$sig"
        say "$n stopped (pid $pid)"
      else
        rm -f "$(pidfile "$n")"
        say "$n not running"
      fi
    done
    ;;
  env)
    cat <<EOF
export LOADGEN_STATE=$STATE
export LOADGEN_PG_PORT=$PG_PORT
export LOADGEN_MY_PORT=$MY_PORT
export LOADGEN_HS_PORT=$HS_PORT
export LOADGEN_HSW_PORT=$HSW_PORT
export LOADGEN_MC_PORT=$MC_PORT
export LOADGEN_REDIS_PORT=$REDIS_PORT
export LOADGEN_REDIS_TLS_PORT=$REDIS_TLS_PORT
export LOADGEN_TLS_CA=$TLS_DIR/ca.crt
export LOADGEN_TLS_WRONG_CA=$TLS_DIR/wrong-ca.crt
export LOADGEN_TLS_SERVER_KEY=$TLS_DIR/server.key
export LOADGEN_PROM_PORT=$PROM_PORT
export LOADGEN_PROM_SCRAPE_A=$SCRAPE_A
export LOADGEN_PROM_SCRAPE_B=$SCRAPE_B
export LOADGEN_PG_SOCKET_DIR=$PG_DIR/sock
export LOADGEN_MY_SOCKET=$MY_DIR/mysqld.sock
export LOADGEN_MC_SOCKET=$MC_SOCK
export LOADGEN_REDIS_SOCKET=$REDIS_SOCK
export LOADGEN_PG_URL=postgres://loadgen@127.0.0.1:$PG_PORT/loadgen
export LOADGEN_MY_URL=mysql://loadgen@127.0.0.1:$MY_PORT/loadgen
export LOADGEN_MY_ED25519_URL=mysql://loadgen_ed25519@127.0.0.1:$MY_PORT/loadgen
export LOADGEN_MY_PAM_URL=mysql://loadgen_pam@127.0.0.1:$MY_PORT/loadgen
export LOADGEN_HS_URL=hs://127.0.0.1:$HS_PORT/loadgen/usr
export LOADGEN_HSW_URL=hs://127.0.0.1:$HSW_PORT/loadgen/usr
export LOADGEN_MC_URL=memcache://127.0.0.1:$MC_PORT
export LOADGEN_REDIS_URL=redis://loadgen:$PASS@127.0.0.1:$REDIS_PORT
export LOADGEN_PG_TLS_URL="postgres://loadgen_tls@localhost:$PG_PORT/loadgen?sslmode=verify-full&sslrootcert=$TLS_DIR/ca.crt"
export LOADGEN_MY_TLS_URL="mysql://loadgen_tls@localhost:$MY_PORT/loadgen?ssl-mode=VERIFY_IDENTITY&ssl-ca=$TLS_DIR/ca.crt"
export LOADGEN_REDIS_TLS_URL="rediss://loadgen:$PASS@localhost:$REDIS_TLS_PORT?cacert=$TLS_DIR/ca.crt"
export LOADGEN_PG_SOCKET_URL="postgres://loadgen@/loadgen?host=$PG_DIR/sock&port=$PG_PORT"
export LOADGEN_MY_SOCKET_URL="mysql://loadgen@localhost/loadgen?socket=$MY_DIR/mysqld.sock"
export LOADGEN_MC_SOCKET_URL=memcache://$MC_SOCK
export LOADGEN_REDIS_SOCKET_URL="redis+unix://$REDIS_SOCK?user=loadgen&pass=$PASS"
export LOADGEN_REDIS_PASSWORD=$REDIS_PASS
export LOADGEN_PROM_URL=http://127.0.0.1:$PROM_PORT
export PGPASSWORD=$PASS
export MYSQL_PWD=$PASS
export LOADGEN_HS_SECRET=$HS_SECRET
EOF
    ;;
  pid)
    [[ $# -eq 1 ]] || die "usage: $0 pid postgres|mariadb|memcached|memcached_unix|redis|prometheus"
    [[ $1 != all ]] || die "pid takes one server name"
    names "$1" && n=${list[0]}
    server_pid "$n" || die "$n is not running (no live pid in $(pidfile "$n"))"
    ;;
  status)
    names "$@"
    for n in "${list[@]}"; do
      if pid=$(server_pid "$n"); then echo "$n running pid $pid ($(proc_state "$pid"))"; else echo "$n down"; fi
    done
    ;;
  *)
    sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac
