#!/usr/bin/env bash
# Installs the Debian 12 packages outboxd needs to build and test (compiler, CMake, libpqxx,
# Boost, spdlog, yaml-cpp, nlohmann_json, cpp-httplib, CLI11, libjwt, GoogleTest, Google
# Benchmark, PostgreSQL 15, libsystemd, the NATS C client and server; lintian, systemd-analyze and promtool for the
# packaging and observability checks; clang for the fuzzers). Idempotent and silent when
# everything is already installed.
# Runs as root, or through sudo for another user.
set -euo pipefail

packages=(
  build-essential g++ cmake pkg-config
  libpqxx-dev libpq-dev
  libboost-dev libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  libcpp-httplib-dev libcli11-dev libjwt-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  openssl # the RS256 admin-token tests make their key pairs with it
  python3 # the documentation checks: examples extracted, links and anchors, the config reference
  socat # the fault tier's TCP proxy, frozen to make the path to PostgreSQL go silent
  postgresql-15 # includes the contrib modules on Debian 12
  ccache # the package and previous-release builds reuse the test build's objects (scripts/ccache.sh)
  pgbouncer # the pgbouncer test tier runs hosts through it in transaction mode (ctest -L pgbouncer)
  libsystemd-dev # sd_notify: readiness, status and watchdog under systemd
  systemd # systemd-analyze verify of the unit (scripts/package-test.sh)
  lintian # the Debian packages are checked with it (scripts/package-test.sh)
  prometheus # promtool; python3 (above) runs the dashboard check (scripts/check-observability.sh)
  chromium chromium-driver python3-selenium # the console's browser test (tests/browser, label browser)
  clang-14 libclang-rt-14-dev # libFuzzer, for the fuzz targets (scripts/fuzz.sh)
  libnats-dev # the NATS C client the nats-relay sample plugin links (plugins/nats-relay)
  nats-server # JetStream on loopback for the nats-relay tests (labels integration and e2e)
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != installed ]]; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

as_root=()
if ((EUID != 0)); then
  as_root=(sudo)
fi

echo "install-deps: installing ${missing[*]}" >&2
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
