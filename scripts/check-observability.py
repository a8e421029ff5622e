#!/usr/bin/env python3
"""Checks the observability kit against what outboxd emits.

deploy/grafana/outboxd.json: valid JSON in the shape Grafana imports (title, uid,
schemaVersion, panels with unique ids, a type, a title, a grid position inside the 24
columns, the ${datasource} variable and at least one target with a PromQL expr), covering
backlog, oldest age, outcomes, handler latency, leases lost, fleet and abandoned threads.
Every expr must be valid PromQL (promtool checks it as a recording rule, with Grafana's
$__rate_interval replaced) and, like every expr of deploy/prometheus/outboxd-rules.yaml,
may only name metrics that host/src/metrics emits. Exit 1 with one line per problem.
"""
import json
import pathlib
import re
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent
problems = []

emitted = set()
for source in (root / "host/src/metrics").glob("*.cpp"):
    emitted.update(re.findall(r'"(outbox_[a-z0-9_]+)"', source.read_text()))
if not emitted:
    problems.append("no metric names found in host/src/metrics")


def check_metric_names(where, expr):
    # Histogram series (_bucket, _sum, _count) are written out in full there too.
    for name in re.findall(r"\b(outbox_[a-z0-9_]+)", expr):
        if name not in emitted:
            problems.append(f"{where}: metric {name} is not emitted by host/src/metrics")


dashboard_path = root / "deploy/grafana/outboxd.json"
try:
    dashboard = json.loads(dashboard_path.read_text())
except (OSError, json.JSONDecodeError) as error:
    print(f"{dashboard_path}: not valid JSON: {error}")
    sys.exit(1)

for key, kind in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list)):
    if not isinstance(dashboard.get(key), kind):
        problems.append(f"dashboard: {key} missing or not a {kind.__name__}")
variables = [v.get("name") for v in dashboard.get("templating", {}).get("list", [])]
if "datasource" not in variables:
    problems.append("dashboard: no datasource template variable")

exprs = []
ids = set()
for index, panel in enumerate(dashboard.get("panels", [])):
    where = f"panel {index} ({panel.get('title', '?')})"
    if not isinstance(panel.get("id"), int) or panel["id"] in ids:
        problems.append(f"{where}: id missing or not unique")
    ids.add(panel.get("id"))
    if panel.get("type") not in {"timeseries", "stat", "gauge", "bargauge", "table", "heatmap"}:
        problems.append(f"{where}: unknown panel type {panel.get('type')!r}")
    if not panel.get("title"):
        problems.append(f"{where}: no title")
    grid = panel.get("gridPos", {})
    if not all(isinstance(grid.get(k), int) for k in "xywh") or grid.get("x", 0) + grid.get("w", 0) > 24:
        problems.append(f"{where}: gridPos must have integer x, y, w, h within 24 columns")
    if panel.get("datasource", {}).get("uid") != "${datasource}":
        problems.append(f"{where}: datasource must be the ${{datasource}} variable")
    targets = panel.get("targets") or []
    if not targets:
        problems.append(f"{where}: no targets")
    ref_ids = [t.get("refId") for t in targets]
    if len(set(ref_ids)) != len(ref_ids):
        problems.append(f"{where}: refIds are not unique")
    for target in targets:
        expr = target.get("expr")
        if not isinstance(expr, str) or not expr.strip():
            problems.append(f"{where}: a target without expr")
            continue
        check_metric_names(where, expr)
        exprs.append((where, expr))

required = ["outbox_publications_backlog", "outbox_publications_oldest_delay_seconds",
            "outbox_publications_processed_total", "outbox_handler_duration_seconds_bucket",
            "outbox_leases_lost_total", "outbox_fleet_hosts", "outbox_handler_abandoned_threads"]
for metric in required:
    if not any(re.search(rf"\b{metric}\b", expr) for _, expr in exprs):
        problems.append(f"dashboard: no panel shows {metric}")

rules_path = root / "deploy/prometheus/outboxd-rules.yaml"
for number, line in enumerate(rules_path.read_text().splitlines(), 1):
    if not line.lstrip().startswith("#"):
        check_metric_names(f"{rules_path.name}:{number}", line)

# PromQL syntax of the dashboard's exprs: promtool parses them as recording rules.
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as rules:
    rules.write("groups:\n  - name: dashboard\n    rules:\n")
    for index, (_, expr) in enumerate(exprs):
        rules.write(f"      - record: dashboard:expr{index}\n        expr: {json.dumps(expr.replace('$__rate_interval', '5m'))}\n")
result = subprocess.run(["promtool", "check", "rules", rules.name], capture_output=True, text=True)
pathlib.Path(rules.name).unlink()
if result.returncode != 0:
    problems.append("dashboard: promtool rejects an expr: " + (result.stdout + result.stderr).strip().replace("\n", " | "))

for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)
