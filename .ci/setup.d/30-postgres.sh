# A throw-away PostgreSQL cluster for the PostgreSQL store tests.
#
# Exports CONTEXTFOLD_TEST_POSTGRES_URL, postgres://contextfold:PASSWORD@127.0.0.1:PORT/contextfold
# (a superuser with a random password, so the tests can check that no message shows it).
# When the variable is already set, the server it names is used and nothing is started.
# Installs Debian's `postgresql` when initdb and pg_ctl are missing; the cluster lives in a
# temporary directory, listens on a free loopback port only, runs as `nobody` when this runs
# as root (initdb refuses root), and is stopped and removed on exit.

if [ -z "${CONTEXTFOLD_TEST_POSTGRES_URL:-}" ]; then
  pg_bin() {
    local dir
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
      dirname "$(readlink -f "$(command -v initdb)")"
      return
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
      [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && echo "$dir" && return
    done
    return 1
  }
  if ! PG_BIN="$(pg_bin)"; then
    echo "installing postgresql"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    PG_BIN="$(pg_bin)"
  fi

  PG_DIR="$(mktemp -d /tmp/contextfold-postgres.XXXXXX)"
  pg_as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
  }
  [ "$(id -u)" = 0 ] && chown nobody "$PG_DIR"
  PG_PASSWORD="$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$PG_PASSWORD" >"$PG_DIR/pwfile"
  [ "$(id -u)" = 0 ] && chown nobody "$PG_DIR/pwfile"
  pg_as_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U contextfold --pwfile="$PG_DIR/pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log"; false; }
  rm -f "$PG_DIR/pwfile"
  ci_on_exit "pg_as_owner '$PG_BIN/pg_ctl' -D '$PG_DIR/data' stop -m fast >/dev/null 2>&1; rm -rf '$PG_DIR'"

  # A free port: one nothing listens on, tried until the server starts on it.
  PG_PORT=""
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
    if pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 start \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$PG_DIR -c fsync=off -c max_connections=200" \
      >/dev/null 2>&1; then
      PG_PORT="$port"
      break
    fi
  done
  [ -n "$PG_PORT" ] || { cat "$PG_DIR/server.log"; echo "PostgreSQL did not start" >&2; false; }
  pg_as_owner "$PG_BIN/createdb" -h "$PG_DIR" -p "$PG_PORT" -U contextfold contextfold
  export CONTEXTFOLD_TEST_POSTGRES_URL="postgres://contextfold:$PG_PASSWORD@127.0.0.1:$PG_PORT/contextfold"
  echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT (data in $PG_DIR)"
fi
