#!/usr/bin/env bash
# The Debian packages end to end, on this machine (root; it installs and purges them):
#  1. scripts/package.sh builds release 1, then release 2 of the same build (only the
#     Debian revision differs), and lintian must report no error for any package;
#  2. release 1 installs: the outboxd user, the conffiles, a root-owned 0755 plugin
#     directory, the unit (systemd-analyze verify), the observability kit;
#  3. release 2 installs over it, keeping a locally changed conffile;
#  4. a plugin built against the installed SDK (find_package(OutboxSdk), no source tree)
#     is accepted by `/usr/bin/outboxd plugins check` and loaded by `/usr/bin/outboxd run`
#     running as the outboxd user against a throwaway PostgreSQL;
#  5. dpkg --purge removes all three and leaves nothing: no user, no /etc/outboxd, no
#     plugin directory, no unit.
# The packages are purged on every exit. It refuses to run when an outboxd package is
# installed already. Takes about 1.5 minutes plus the Release build of build-package/ (20
# minutes from scratch on a busy shared 2-core machine, seconds when it is up to date).
# OUTBOX_PACKAGE_BUILD_DIR overrides the build directory (default: build-package/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${OUTBOX_PACKAGE_BUILD_DIR:-$root/build-package}
packages=(outboxd-sample-plugins outboxd-sdk-dev outboxd)

fail() {
  echo "package-test: FAILED: $*" >&2
  exit 1
}
installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == installed ]]
}

if ((EUID != 0)); then
  fail "must run as root (it installs and purges the packages)"
fi
for package in "${packages[@]}"; do
  if dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qv '^not-installed$'; then
    fail "$package is installed already; purge it first (this test must not replace it)"
  fi
done
"$root/scripts/install-deps.sh"

work=$(mktemp -d /tmp/outbox-package-test.XXXXXX)
pg_dir=$work/pg
host_pid=
cleanup() {
  if [[ -n "$host_pid" ]]; then kill "$host_pid" 2>/dev/null || true; fi
  "$root/scripts/pg.sh" stop "$pg_dir" >/dev/null 2>&1 || true
  dpkg --purge "${packages[@]}" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 143" TERM INT

echo "package-test: building release 1 and 2" >&2
"$root/scripts/package.sh" --build-dir "$build_dir" --release 1 >/dev/null
mkdir -p "$work/r1" "$work/r2"
mv "$build_dir"/*.deb "$work/r1/"
"$root/scripts/package.sh" --build-dir "$build_dir" --release 2 >/dev/null
mv "$build_dir"/*.deb "$work/r2/"
for package in "${packages[@]}"; do
  [[ -f $(echo "$work"/r2/"${package}"_*.deb) ]] || fail "no ${package} package was built"
done

echo "package-test: lintian" >&2
# Errors fail; warnings are shown.
lintian --fail-on error --tag-display-limit 0 "$work"/r2/*.deb || fail "lintian reports errors"

echo "package-test: installing release 1" >&2
dpkg -i "$work"/r1/*.deb >/dev/null
[[ "$(dpkg-query -W -f='${Version}' outboxd)" == *-1 ]] || fail "release 1 is not installed"
getent passwd outboxd >/dev/null || fail "postinst did not create the outboxd user"
[[ "$(getent passwd outboxd | cut -d: -f7)" == */nologin || "$(getent passwd outboxd | cut -d: -f7)" == /bin/false ]] ||
  fail "the outboxd user has a login shell"
dpkg-query -W -f='${Conffiles}\n' outboxd | grep -q ' /etc/outboxd/outboxd.yaml ' || fail "outboxd.yaml is not a conffile"
dpkg-query -W -f='${Conffiles}\n' outboxd | grep -q ' /etc/default/outboxd ' || fail "/etc/default/outboxd is not a conffile"
[[ "$(stat -c '%U:%G %a' /etc/default/outboxd)" == "root:outboxd 640" ]] || fail "/etc/default/outboxd is not root:outboxd 0640"
[[ "$(stat -c '%U:%G %a' /usr/lib/outboxd/plugins)" == "root:root 755" ]] || fail "the plugin directory is not root:root 0755"
for file in /usr/bin/outboxd /lib/systemd/system/outboxd.service /usr/share/outboxd/migrations/V1__outbox_schema.sql \
  /usr/share/outboxd/grafana/outboxd.json /usr/share/outboxd/prometheus/outboxd-rules.yaml \
  /usr/lib/cmake/OutboxSdk/OutboxSdkConfig.cmake /usr/include/outbox/sdk.hpp; do
  [[ -e "$file" ]] || fail "$file is not installed"
done
[[ -n "$(ls /usr/lib/outboxd/plugins/*.so)" ]] || fail "no sample plugin in /usr/lib/outboxd/plugins"
# Without man-db, systemd-analyze cannot look the Documentation= page up.
verify_args=()
command -v man >/dev/null || verify_args=(--man=no)
# It exits 0 on unknown keys and bad values, only saying so: any output fails too.
verify=$(systemd-analyze verify "${verify_args[@]}" /lib/systemd/system/outboxd.service 2>&1) && [[ -z "$verify" ]] ||
  fail "systemd-analyze verify rejects the unit: $verify"

echo "package-test: upgrading to release 2 over a locally changed conffile" >&2
echo "# changed by the operator" >>/etc/outboxd/outboxd.yaml
dpkg -i "$work"/r2/*.deb >/dev/null </dev/null
[[ "$(dpkg-query -W -f='${Version}' outboxd)" == *-2 ]] || fail "release 2 did not install over release 1"
grep -q '^# changed by the operator$' /etc/outboxd/outboxd.yaml || fail "the upgrade replaced the changed conffile"
[[ "$(stat -c '%U:%G %a' /etc/default/outboxd)" == "root:outboxd 640" ]] || fail "the upgrade lost /etc/default/outboxd's permissions"

echo "package-test: a plugin built against the installed SDK, loaded by the installed binary" >&2
cmake -S "$root/tests/sdk_package/plugin" -B "$work/plugin-build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/plugin-build" >/dev/null
install -d -m 0755 "$work/plugins"
install -m 0644 "$work/plugin-build/liboutside_team.so" "$work/plugins/"
check=$(/usr/bin/outboxd plugins check "$work/plugins") || fail "outboxd plugins check refused the plugin: $check"
grep -q outside-team <<<"$check" || fail "outboxd plugins check did not report the plugin: $check"
chmod 0755 "$work"
port=$("$root/scripts/pg.sh" free-port)
url=$("$root/scripts/pg.sh" start "$pg_dir" "$port")
OUTBOX_DATABASE_URL=$url /usr/bin/outboxd migrate >/dev/null
# setpriv, not runuser: it execs, so $! is outboxd itself and gets the SIGTERM.
setpriv --reuid=outboxd --regid=outboxd --init-groups env OUTBOX_DATABASE_URL="$url" OUTBOX_PLUGIN_DIR="$work/plugins" OUTBOX_ADMIN_LISTEN=off \
  /usr/bin/outboxd run --config /etc/outboxd/outboxd.yaml >"$work/run.log" 2>&1 &
host_pid=$!
for _ in $(seq 1 100); do
  grep -q "started as" "$work/run.log" && break
  kill -0 "$host_pid" 2>/dev/null || break
  sleep 0.2
done
grep -q "plugin loaded: handler outside-team" "$work/run.log" || fail "outboxd run did not load the plugin: $(cat "$work/run.log")"
kill -TERM "$host_pid"
wait "$host_pid" || fail "outboxd run did not stop cleanly: $(cat "$work/run.log")"
host_pid=
"$root/scripts/pg.sh" stop "$pg_dir" >/dev/null

echo "package-test: purging" >&2
dpkg --purge "${packages[@]}" >/dev/null
for package in "${packages[@]}"; do
  ! installed "$package" || fail "$package is still installed"
done
# The system user stays (see deploy/debian/postrm) and must still be unable to log in.
[[ "$(getent passwd outboxd | cut -d: -f7)" == */nologin || "$(getent passwd outboxd | cut -d: -f7)" == /bin/false ]] ||
  fail "the outboxd user kept after purge can log in"
for path in /etc/outboxd /etc/default/outboxd /usr/lib/outboxd /usr/bin/outboxd /lib/systemd/system/outboxd.service \
  /usr/share/outboxd /usr/include/outbox /usr/lib/cmake/OutboxSdk; do
  [[ ! -e "$path" ]] || fail "$path is left after purge"
done
! dpkg-statoverride --list /etc/default/outboxd >/dev/null || fail "the statoverride is left after purge"
echo "package-test: all checks passed" >&2
