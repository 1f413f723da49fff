#!/usr/bin/env python3
"""check_live.py PROMETHEUS_URL COLLECTOR_FILE DASHBOARD_FILE [EXPR...]:
after a live run (test/monitoring/run), asks Prometheus whether every
metric of the collector file and every query of the dashboard (its
panels' and its variables') returns series, whether every alerting rule
evaluates without error, and whether each EXPR (what the run's load must
show, such as 'idempotency_takeovers_total{namespace="jobs"} == 1')
returns series. Prints one TAP-like line per check and the closing line
"N passed, M failed"; exits non-zero on a failure."""
import json
import re
import sys
import urllib.parse
import urllib.request

prometheus, collector_file, dashboard_file = sys.argv[1:4]
expected = sys.argv[4:]

# What the dashboard's variables stand for in this run: every value.
VARIABLES = {"$__rate_interval": "15s", "$job": ".*", "$instance": ".*", "$namespace": ".*"}


def api(path, **params):
    """The data of a Prometheus HTTP API call (GET path?params)."""
    url = f"{prometheus}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise RuntimeError(f"{path}: {body}")
    return body["data"]


def substitute(expr):
    """A dashboard query with its variables replaced."""
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


results = []


def check(name, passed, detail=""):
    """Records and prints one check."""
    results.append(passed)
    print(f"{'ok' if passed else 'not ok'} {len(results)} - {name}{'' if passed else ': ' + detail}")


# Every metric the collector defines has series.
with open(collector_file) as f:
    metrics = re.findall(r"^\s*-\s*metric_name:\s*(\S+)", f.read(), re.M)
for metric in metrics:
    series = api("query", query=f"count({metric})")["result"]
    check(f"metric {metric} returns series", bool(series), "no series")

# Every query of the dashboard returns series: panels' targets, then the
# variables' label_values(selector, label).
with open(dashboard_file) as f:
    dashboard = json.load(f)
for panel in dashboard["panels"]:
    for target in panel.get("targets", []):
        expr = substitute(target["expr"])
        series = api("query", query=expr)["result"]
        check(f"panel \"{panel['title']}\" {target['refId']} returns series", bool(series), expr)
for variable in dashboard["templating"]["list"]:
    if variable["type"] != "query":
        continue
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["definition"])
    selector, label = substitute(m.group(1)), m.group(2)
    values = api(f"label/{label}/values", **{"match[]": selector})
    check(f"variable ${variable['name']} has values", bool(values), variable["definition"])

# Every alerting rule was loaded and evaluates without error.
groups = api("rules", type="alert")["groups"]
rules = [r for g in groups for r in g["rules"]]
check("the alerting rules are loaded", len(rules) == 6, f"{len(rules)} rules")
for rule in rules:
    check(f"rule {rule['name']} evaluates", rule.get("health") == "ok", rule.get("lastError", ""))

# What the load made shows in the values.
for expr in expected:
    series = api("query", query=expr)["result"]
    check(f"{expr}", bool(series), "no series")

failed = results.count(False)
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
