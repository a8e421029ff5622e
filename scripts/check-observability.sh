#!/usr/bin/env bash
# Checks the observability kit (deploy/prometheus, deploy/grafana): promtool check rules on
# the alerting rules, then scripts/check-observability.py on the dashboard (JSON shape,
# PromQL syntax) and on the metric names both use. Takes about a second.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
promtool check rules "$root/deploy/prometheus/outboxd-rules.yaml"
python3 "$root/scripts/check-observability.py"
echo "check-observability: dashboard and rules are valid"
