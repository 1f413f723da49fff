#!/usr/bin/python3
"""bench.py: the idempotency extension against the bare-SQL ceiling (on a
plain table, and on one with CHECK constraints), a PL/pgSQL implementation
and a client-side implementation, in one run.

Run through `make bench` (bench/run), which builds and installs the
extension, starts a private server unless PGHOST/PGPORT name one, and calls
this script with the connection in the PG* variables. Every scenario runs
with pgbench -M prepared (the client-side contender with its own Python
processes), contenders alternating A B C D A B C D so that machine drift
cancels; the table reports medians of the repetitions.

Writes bench/results/results.md (the table), results.csv and chart.png."""
import argparse
import csv
import json
import math
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import client_side

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
REQUEST = {"amount": 100, "currency": "EUR", "customer": "c-42",
           "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}
OTHER = dict(REQUEST, amount=101)
RESULT = {"payment_id": 7, "status": "captured"}
CONTENDERS = ["extension", "ceiling", "constrained", "plpgsql", "client"]


def psql(sql, db=None, options=None):
    """Runs SQL with psql; returns its unaligned output, raising on error."""
    env = dict(os.environ)
    if options:
        env["PGOPTIONS"] = options
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db or DB],
                         input=sql, env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, int(round(p / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[index]


def pgbench(script, clients, duration, sync, variables, options=""):
    """One pgbench run (options: more -c settings for its sessions); returns
    (transactions, latencies in ms, transaction end times)."""
    env = dict(os.environ, PGOPTIONS=f"-c synchronous_commit={sync} {options}".strip())
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, THREADS)),
               "-T", str(duration), "-f", str(SCRIPTS / script), "-l", "--log-prefix", f"{tmp}/log", DB]
        for name, value in variables.items():
            cmd[1:1] = ["-D", f"{name}={value}"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        failed = re.search(r"number of failed transactions: (\d+)", done.stdout)
        if done.returncode != 0 or (failed and int(failed.group(1)) > 0):
            sys.exit(f"pgbench {script} failed:\n{done.stdout}\n{done.stderr}")
        latencies, ends = read_logs(tmp)
    return len(latencies), latencies, ends


def read_logs(tmp):
    """pgbench's per-transaction logs in tmp: (latencies in ms, end times in s)."""
    latencies, ends = [], []
    for log in pathlib.Path(tmp).glob("log*"):
        for line in log.read_text().splitlines():
            f = line.split()
            latencies.append(int(f[2]) / 1000.0)
            ends.append(int(f[4]) + int(f[5]) / 1e6)
    return latencies, ends


def run_contender(contender, scenario, clients, duration, sync, ns, nkeys=0, round_no=0):
    """One run of one contender; returns (tps, latencies)."""
    if contender == "client":
        conninfo = f"dbname={DB} options='-c synchronous_commit={sync}'"
        n, lat, counts = client_side.run(scenario, conninfo, clients, duration, ns, nkeys, round_no,
                                         REQUEST, OTHER, RESULT)
        # A fresh run that replays keys measures replays (0.5.0's chart did).
        if scenario == "fresh" and set(counts) != {"fresh"}:
            sys.exit(f"the client's fresh run {round_no} answered {counts}: every key of a fresh run must be new")
        return n / duration, lat
    variables = {"ns": ns, "nkeys": nkeys, "round": round_no}
    if contender == "constrained":  # the ceiling's statements on the constrained table
        text = (SCRIPTS / f"ceiling_{scenario}.sql").read_text()
        with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
            script.write(text.replace("ceiling.record", "constrained.record").replace("'ceiling'", "'constrained'"))
            script.flush()
            n, lat, _ = pgbench(script.name, clients, duration, sync, variables)
        return n / duration, lat
    n, lat, _ = pgbench(f"{contender}_{scenario}.sql", clients, duration, sync, variables)
    return n / duration, lat


def record_table(contender):
    return "idempotency.idempotency_record" if contender == "extension" else f"{contender}.record"


def prepopulate(nkeys):
    """nkeys committed records in namespace 'replay' for every contender, the
    request hashed the way each one hashes it."""
    psql(f"CALL bench.load_replay({nkeys}, '{json.dumps(REQUEST)}', '{json.dumps(RESULT)}')")
    psql(f"""INSERT INTO client.record
             SELECT 'replay', i::text, 'committed', idempotency.idem_request_hash('{json.dumps(REQUEST)}'),
                    '{json.dumps(REQUEST)}', '{json.dumps(RESULT)}', NULL, now(), now(), now() + interval '1 day'
             FROM generate_series(1, {nkeys}) i""")
    psql("VACUUM ANALYZE")


def summarize(rows, scenario, sync, per_contender):
    """Medians over repetitions: tps, mean and p99 latency."""
    for contender, runs in per_contender.items():
        tps = statistics.median(r[0] for r in runs)
        mean = statistics.median(statistics.fmean(r[1]) for r in runs)
        p99 = statistics.median(percentile(r[1], 99) for r in runs)
        rows.append({"scenario": scenario, "sync": sync, "contender": contender,
                     "tps": tps, "mean_ms": mean, "p99_ms": p99})


def cycle_scenarios(rows, args):
    """fresh, replay, mismatch and contention for all four contenders."""
    round_no = 0
    for scenario, syncs, clients in (("fresh", ("off", "on"), 8), ("replay", ("off",), 8),
                                     ("mismatch", ("off",), 8), ("contention", ("off", "on"), 16)):
        for sync in syncs:
            per = {c: [] for c in CONTENDERS}
            for rep in range(args.reps):
                order = CONTENDERS[rep % len(CONTENDERS):] + CONTENDERS[:rep % len(CONTENDERS)]
                for contender in order:
                    round_no += 1
                    ns = "hot" if scenario == "contention" else ("replay" if scenario in ("replay", "mismatch") else "fresh")
                    per[contender].append(run_contender(contender, scenario, clients, args.duration, sync, ns,
                                                        args.nkeys, round_no))
                    if scenario == "contention":
                        check_round(contender, round_no)
            summarize(rows, scenario, "on" if sync == "on" else ("off" if len(syncs) > 1 else "either (read-only)"), per)
            print_progress(rows)


def inbackend_scenario(rows, args):
    """CPU per cycle: n cycles of each contender inside one procedure
    (bench.cycles), synchronous_commit off, alternating; medians."""
    n = args.inbackend_cycles
    order = ["extension", "ceiling", "lean", "constrained", "plpgsql"]
    for scenario in ("fresh", "replay", "mismatch"):
        seconds = {c: [] for c in order}
        for rep in range(args.reps):
            for contender in order[rep % len(order):] + order[:rep % len(order)]:
                base = (rep * len(order) + order.index(contender) + 1) * 10**9
                out = psql(f"CALL bench.cycles('{contender}', '{scenario}', {n}, {base}, {args.nkeys})",
                           options="-c synchronous_commit=off")
                seconds[contender].append(float(out))
        for contender, runs in seconds.items():
            s = statistics.median(runs)
            rows.append({"scenario": f"in-backend {scenario}", "sync": "off", "contender": contender,
                         "tps": n / s, "mean_ms": s * 1000 / n, "p99_ms": float("nan"),
                         "us_per_cycle": s * 1e6 / n})
        print_progress(rows)


def instructions_scenario(rows, args):
    """Instructions per cycle, counted by callgrind in a single-user backend
    (bench/instructions): repeatable on a busy machine. tps holds cycles per
    10^9 instructions, so the ratio column compares as elsewhere."""
    small, large = (100, 600) if args.quick else (200, 2000)
    out = subprocess.run([str(HERE / "instructions"), str(small), str(large)], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        contender, scenario, per_cycle = line.split()
        rows.append({"scenario": f"instructions, {scenario}", "sync": "off", "contender": contender,
                     "tps": 1e9 / int(per_cycle), "mean_ms": float("nan"), "p99_ms": float("nan"),
                     "instructions": int(per_cycle)})
    print_progress(rows)


WIRE_CONTENDERS = ["extension", "ceiling", "lean", "plpgsql"]
WIRE_REPORT = []


def verdict(ok, text):
    """A target's line, PASS or MISS (a measurement, never a failure of the run)."""
    return f"    {'PASS' if ok else 'MISS'}  {text}"


def wire_scenario(rows, args):
    """Over the wire (issue 27): instructions per cycle of the backend serving
    one pgbench client, WAL bytes by record type and row versions per fresh
    cycle (bench/wire, in a scratch cluster), and the fresh cycle's
    throughput with 4 clients on the benchmark server, extension and ceiling
    alternating. Prints each target's ratio as PASS or MISS."""
    small, large, cycles = (100, 600, 1000) if args.quick else (100, 1100, 3000)
    out = subprocess.run([str(HERE / "wire"), str(small), str(large), str(cycles)], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    instr, wal, records, tuples = {}, {}, {}, {}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "instructions":
            instr[(f[1], f[2])] = int(f[3])
        elif f[0] == "wal":
            wal[f[1]] = [int(x) / int(f[2]) for x in f[3:5]]
        elif f[0] == "walrecord":
            records.setdefault(f[1], []).append((f[2], int(f[3]), int(f[4]), int(f[5])))
        elif f[0] == "tuples":
            tuples[f[1]] = [int(x) / int(f[2]) for x in f[3:]]
    for (scenario, contender), n in instr.items():
        rows.append({"scenario": f"over the wire, {scenario}", "sync": "off",
                     "contender": "idem_request_hash" if contender == "alone" else contender,
                     "tps": 1e9 / n, "mean_ms": float("nan"), "p99_ms": float("nan"), "instructions": n})
    for contender in WIRE_CONTENDERS:
        (rec, fpi), (_, upd, hot, dele, dead) = wal[contender], tuples[contender]
        rows.append({"scenario": "fresh cycle: WAL and row versions", "sync": "off", "contender": contender,
                     "tps": float("nan"), "mean_ms": float("nan"), "p99_ms": float("nan"), "wal_bytes": rec,
                     "fpi_bytes": fpi, "dead_versions": upd + dele, "hot": hot, "dead_left": dead})
    print_progress(rows)
    per = {}
    for sync in ("off", "on"):
        per[sync] = {c: [] for c in ("extension", "ceiling")}
        for rep in range(args.reps):
            for contender in (("extension", "ceiling") if rep % 2 == 0 else ("ceiling", "extension")):
                per[sync][contender].append(run_contender(contender, "fresh", 4, args.duration, sync, "fresh"))
        summarize(rows, "fresh, 4 clients", sync, per[sync])
        print_progress(rows)
    tps = {sync: {c: statistics.median(r[0] for r in runs) for c, runs in p.items()} for sync, p in per.items()}

    ext, ceil = instr[("fresh", "extension")], instr[("fresh", "ceiling")]
    replay_base = instr[("replay", "lean")] + instr[("fingerprint", "alone")]
    (ext_rec, ext_fpi), (ceil_rec, ceil_fpi) = wal["extension"], wal["ceiling"]
    dead = tuples["extension"][1] + tuples["extension"][3]
    ext_replay = instr[("replay", "extension")]
    lines = [f"Targets of issue 27 over the wire (one pgbench client, -M prepared, callgrind, {large:,} less {small:,}"
             f" transactions; WAL and row versions over {cycles:,} fresh cycles; against the ceiling of this run):", "",
             verdict(ext <= 0.8 * ceil, f"fresh: extension {ext:,} instructions, {ext / ceil:.2f}x the ceiling's"
                     f" {ceil:,} (target 0.8x)"),
             verdict(ext_rec <= 0.65 * ceil_rec, f"fresh: extension {ext_rec:,.0f} WAL bytes of records,"
                     f" {ext_rec / ceil_rec:.2f}x the ceiling's {ceil_rec:,.0f} (target 0.65x); with the full-page"
                     f" images after a checkpoint {ext_rec + ext_fpi:,.0f} against {ceil_rec + ceil_fpi:,.0f},"
                     f" {(ext_rec + ext_fpi) / (ceil_rec + ceil_fpi):.2f}x"),
             verdict(dead == 0, f"fresh: extension {dead:.2f} dead row versions per cycle (target 0 without a lease;"
                     f" the ceiling {tuples['ceiling'][1] + tuples['ceiling'][3]:.2f})")]
    for sync in ("off", "on"):
        e, c = tps[sync]["extension"], tps[sync]["ceiling"]
        lines.append(verdict(e >= c, f"fresh, 4 clients, synchronous_commit {sync}: extension {e:,.0f} tps,"
                                     f" {e / c:.2f}x the ceiling's {c:,.0f} (target 1.0x or more; medians of"
                                     f" {args.reps} alternating runs)"))
    lines += [verdict(ext_replay <= 1.1 * replay_base,
                      f"replay: extension {ext_replay:,} instructions, {ext_replay / replay_base:.2f}x lean's one"
                      f" SELECT {instr[('replay', 'lean')]:,} + idem_request_hash alone"
                      f" {instr[('fingerprint', 'alone')]:,} = {replay_base:,} (target 1.1x)"),
              ]
    for scenario, target in (("replay", 0.5), ("mismatch", 0.5), ("fresh", None)):
        batch, single = instr.get((f"batch_{scenario}", "extension")), instr[(scenario, "extension")]
        if batch is None:
            continue
        per_key = batch / 500
        text = (f"batch of 500 {scenario}{'es' if scenario == 'mismatch' else 's'}: {per_key:,.0f} instructions per"
                f" key, {per_key / single:.2f}x one idem_begin{' cycle' if scenario == 'fresh' else ''} over the"
                f" wire ({single:,})")
        lines.append(verdict(per_key <= target * single, text + f" (target {target}x)") if target is not None
                     else f"    ----  {text} (measured, no target: past a quarter of max_locks_per_transaction"
                          f" a transaction's claims are written as in_progress rows and finished by an update, not"
                          f" held by their lock alone, so a batch's fresh key writes twice where a single cycle"
                          f" writes once; the round trips it saves pay for that)")
    lines += ["", "WAL per fresh cycle by record type (bytes of records + full-page images, records per cycle):", "",
              "| record type | " + " | ".join(WIRE_CONTENDERS) + " |", "|---|" + "---:|" * len(WIRE_CONTENDERS)]
    kinds = []
    for contender in WIRE_CONTENDERS:
        kinds += [k for k, *_ in records[contender] if k not in kinds]
    for kind in kinds:
        cells = []
        for contender in WIRE_CONTENDERS:
            match = [r for r in records[contender] if r[0] == kind]
            cells.append(f"{match[0][2] / cycles:,.0f} + {match[0][3] / cycles:,.0f} ({match[0][1] / cycles:.2f})"
                         if match else "")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    WIRE_REPORT.extend(lines)
    print("\n".join(lines), flush=True)


def decisions_scenario(rows, args):
    """The store's two-way choices and 1.0 against 0.9.1 (bench/decisions):
    instructions per cycle over the wire of builds made in the same run.
    Targets (issue 39): holding claims by their lock and writing directly
    each save at least 10% of a fresh cycle, or the simpler way wins; and
    no cycle costs more than 0.9.1's (1% of noise allowed)."""
    out = subprocess.run([str(HERE / "decisions")], check=True, stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f[0] == "decision":
            saving = float(f[5].rstrip("%"))
            verdict = "PASS" if saving >= 10 else "MISS"
            print(f"  {verdict} {f[1]} saves {saving:.1f}% of a {f[2]} cycle ({f[3]} against {f[4]} instructions;"
                  " target 10%)", flush=True)
            rows.append({"scenario": f"decision: {f[1]}, {f[2]}", "sync": "off", "contender": "as built",
                         "tps": float("nan"), "mean_ms": float("nan"), "p99_ms": float("nan"),
                         "instructions": int(f[3])})
        elif f[0] == "release":
            ratio = float(f[5].rstrip("x"))
            verdict = "PASS" if ratio <= 1.01 else "MISS"
            print(f"  {verdict} {f[2]}: {ratio:.3f}x 0.9.1's instructions ({f[3]} against {f[4]}; target 1.01x)",
                  flush=True)
            rows.append({"scenario": f"against {f[1]}: {f[2]}", "sync": "off", "contender": "extension",
                         "tps": float("nan"), "mean_ms": float("nan"), "p99_ms": float("nan"),
                         "instructions": int(f[3])})


def portable_scenario(rows, args):
    """The portable edition beside the native one and the bench's PL/pgSQL
    store (bench/portable, in clusters of its own): instructions per cycle
    that callgrind counts in a single-user backend. Not in the default
    groups (about 5 minutes; --quick: fresh, replay and mismatch only).
    Target (issue 40): fresh and replay at most 1.3x the PL/pgSQL store."""
    scenarios = ["fresh", "replay", "mismatch"] if args.quick else []
    out = subprocess.run([str(HERE / "portable"), *scenarios], check=True, stdout=subprocess.PIPE,
                         text=True).stdout
    found = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) != 4 or f[0] not in ("portable", "native") or not f[3].isdigit():
            continue   # bench/portable's progress lines
        edition, contender, scenario, per_cycle = f[0], f[1], f[2], int(f[3])
        found[(edition, contender, scenario)] = per_cycle
        rows.append({"scenario": f"portable edition, {scenario}", "sync": "off",
                     # the native edition as "extension", so that the ratio column compares with it
                     "contender": {"native": "extension", "portable": "portable"}[edition]
                                  + (" (PL/pgSQL store)" if contender == "plpgsql" else ""),
                     "tps": 1e9 / per_cycle, "mean_ms": float("nan"), "p99_ms": float("nan"),
                     "instructions": per_cycle})
    for scenario in ("fresh", "replay"):
        store, plpgsql = found.get(("portable", "store", scenario)), found.get(("portable", "plpgsql", scenario))
        if store and plpgsql:
            print(verdict(store <= 1.3 * plpgsql, f"{scenario}: portable edition {store:,} instructions,"
                          f" {store / plpgsql:.2f}x the PL/pgSQL store's {plpgsql:,} (target 1.3x)"), flush=True)
    print_progress(rows)


def counters_scenario(rows, args):
    """What the counters cost, alternating idempotency.track_counters on and
    off: the fresh cycle over pgbench (synchronous_commit off, so CPU shows),
    and the bare cost per call, from one session replaying one key n times
    in a single statement (no network, no writes)."""
    if psql("SELECT counters_on FROM idempotency.idem_stats") != "t":
        sys.exit("the counters are off: the benchmark server must have shared_preload_libraries = 'idempotency'")
    per = {"extension": [], "extension, not counting": []}
    for rep in range(args.reps):
        for label in (list(per) if rep % 2 == 0 else list(reversed(per))):
            options = "-c idempotency.track_counters=off" if label != "extension" else ""
            n, lat, _ = pgbench("extension_fresh.sql", 8, args.duration, "off",
                                {"ns": "fresh", "nkeys": 0, "round": 0}, options)
            per[label].append((n / args.duration, lat))
    summarize(rows, "fresh, counters on vs off", "off", per)
    for r in rows[-2:]:   # the spread of the runs, to compare the medians with
        tps = [run[0] for run in per[r["contender"]]]
        r["tps_range"] = f"runs from {min(tps):,.0f} to {max(tps):,.0f} tps"
    calls = 300000
    psql("""BEGIN;
            SELECT idempotency.idem_begin('counters', 'k', '{"a": 1}');
            SELECT idempotency.idem_commit('counters', 'k', '{}');
            COMMIT;""")
    seconds = {"on": [], "off": []}
    for rep in range(3):
        for setting in (("on", "off") if rep % 2 == 0 else ("off", "on")):
            started = time.time()
            psql(f"""SET idempotency.track_counters = {setting};
                     SELECT count(*) FROM generate_series(1, {calls}) i,
                            LATERAL idempotency.idem_begin('counters', 'k', jsonb_build_object('a', 1 + 0 * i)) o""")
            seconds[setting].append(time.time() - started)
    on, off = statistics.median(seconds["on"]), statistics.median(seconds["off"])
    rows.append({"scenario": f"{calls:,} replays in one statement", "sync": "either (read-only)",
                 "contender": "extension", "tps": calls / on, "mean_ms": on * 1000 / calls, "p99_ms": float("nan"),
                 "tps_range": f"counting costs {(on - off) * 1e9 / calls:.0f} ns per call ({on:.3f} s against {off:.3f} s)"})
    rows.append({"scenario": f"{calls:,} replays in one statement", "sync": "either (read-only)",
                 "contender": "extension, not counting", "tps": calls / off, "mean_ms": off * 1000 / calls,
                 "p99_ms": float("nan")})
    print_progress(rows)


def check_round(contender, round_no):
    """The count of fresh answers must equal the distinct keys of the round,
    with exactly one business row per key; otherwise the run fails."""
    fresh, keys, business, rows, total = psql(f"""
        SELECT (SELECT count(*) FROM bench.tally WHERE contender = '{contender}' AND round = {round_no} AND kind = 'fresh'),
               (SELECT count(*) FROM {record_table(contender)} WHERE namespace = 'hot'
                    AND key_value::bigint / 1000 = {round_no}),
               (SELECT count(DISTINCT key_value) FROM bench.business WHERE contender = '{contender}' AND round = {round_no}),
               (SELECT count(*) FROM bench.business WHERE contender = '{contender}' AND round = {round_no}),
               (SELECT count(*) FROM bench.tally WHERE contender = '{contender}' AND round = {round_no})""").split("|")
    kinds = psql(f"""SELECT string_agg(kind || '=' || n, ' ' ORDER BY kind) FROM
                     (SELECT kind, count(*) n FROM bench.tally WHERE contender = '{contender}' AND round = {round_no}
                      GROUP BY kind) t""")
    CONTENTION_COUNTS.setdefault(contender, []).append(kinds)
    if not (fresh == keys == business == rows) or int(keys) == 0:
        sys.exit(f"contention round {round_no} of {contender}: {fresh} fresh answers, {keys} keys, "
                 f"{business} business keys in {rows} rows ({kinds}); exactly one fresh per key is required")


def make_payload(target):
    """A nested JSON value of about target bytes of canonical text: objects
    of arrays of objects, with strings, numbers and booleans."""
    def item(i):
        return {"id": i, "name": f"item-{i:06d}", "price": i * 1.25, "tags": ["a", "b", f"t{i % 7}"],
                "active": i % 2 == 0, "dims": {"w": i % 13, "h": i % 17, "unit": "cm"}}
    size_of_one = len(json.dumps(item(0), separators=(",", ":")))
    n = max(1, target // size_of_one)
    groups = [{"group": g, "items": [item(g * 100 + i) for i in range(min(100, n - g * 100))]}
              for g in range((n + 99) // 100)]
    return {"customer": "c-42", "groups": groups}


def fingerprint_scenario(rows, args):
    """idem_request_hash against sha256(convert_to(payload::text, 'UTF8'))."""
    sizes = (("1 KiB", 1024), ("64 KiB", 65536), ("1 MiB", 1048576))
    for i, (label, size) in enumerate(sizes, 1):
        payload = json.dumps(make_payload(size))
        psql(f"INSERT INTO bench.payloads VALUES ({i}, '{label}', '{payload}')")
    for i, (label, size) in enumerate(sizes, 1):
        nbytes = int(psql(f"SELECT octet_length(idempotency.idem_canonical(payload)) FROM bench.payloads WHERE id = {i}"))
        per = {"extension": [], "built-in": []}
        for rep in range(args.reps):
            for contender in (("extension", "builtin") if rep % 2 == 0 else ("builtin", "extension")):
                n, lat, _ = pgbench(f"{contender}_fingerprint.sql", THREADS, args.fingerprint_duration, "off", {"id": i})
                name = "built-in" if contender == "builtin" else contender
                per[name].append((n / args.fingerprint_duration, lat))
        for contender, runs in per.items():
            tps = statistics.median(r[0] for r in runs)
            rows.append({"scenario": f"fingerprint {label}", "sync": "either (read-only)", "contender": contender,
                         "tps": tps, "mean_ms": statistics.median(statistics.fmean(r[1]) for r in runs),
                         "p99_ms": statistics.median(percentile(r[1], 99) for r in runs),
                         "mb_per_s": tps * nbytes / 1e6})
        print_progress(rows)


def bulk_load(namespace, n, expired):
    """n committed records in namespace, expired or not, straight into the table.
    Expired ones expire a millisecond apart, as records written over time
    do (a transaction's records share its now()); n in one INSERT would
    share one expires_at, the worst case for idem_purge's chunks in one
    transaction (each walks again over the ties the earlier ones deleted:
    docs/performance.md)."""
    expires = "now() - interval '1 day' - i * interval '1 ms'" if expired else "now() + interval '1 day'"
    psql(f"""INSERT INTO idempotency.idempotency_record
             SELECT '{namespace}', i::text, 'committed', idempotency.idem_request_hash('{json.dumps(REQUEST)}'),
                    '{json.dumps(REQUEST)}', '{json.dumps(RESULT)}', NULL, now(), now(), {expires}
             FROM generate_series(1, {n}) i""")
    psql("VACUUM ANALYZE idempotency.idempotency_record")


def load_while(sync, duration, sql, cancelled_ok=False):
    """Runs sql in one session while a fresh-cycle load (4 clients) runs for
    duration seconds; returns (seconds sql took, latencies in ms of the load
    transactions that finished meanwhile)."""
    env = dict(os.environ, PGOPTIONS=f"-c synchronous_commit={sync}")
    with tempfile.TemporaryDirectory() as tmp:
        load = subprocess.Popen(["pgbench", "-n", "-M", "prepared", "-c", "4", "-j", str(THREADS), "-T",
                                 str(duration), "-f", str(SCRIPTS / "extension_fresh.sql"),
                                 "-D", "ns=purgeload", "-l", "--log-prefix", f"{tmp}/log", DB],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        start = time.time()
        statements = [sql] if isinstance(sql, str) else sql
        done = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB]
                              + [arg for statement in statements for arg in ("-c", statement)],
                              env=env, capture_output=True, text=True)
        end = time.time()
        if done.returncode != 0 and not (cancelled_ok and "statement timeout" in done.stderr):
            sys.exit(f"{sql} failed: {done.stderr}")
        load.communicate()
        latencies, ends = read_logs(tmp)
    return end - start, [lat for lat, finished in zip(latencies, ends) if start <= finished <= end]


PURGE_COPY_COLUMNS = """namespace text COLLATE "C" NOT NULL, key_value text COLLATE "C" NOT NULL, status text NOT NULL,
    request_hash bytea NOT NULL, request_payload jsonb, result_payload jsonb, error_payload jsonb,
    created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
    attempt integer NOT NULL DEFAULT 1, fence bigint"""


def purge_copies(names):
    """Plain copies of the purge rows now in the extension's table, made
    without its schema: CREATE TABLE with the same columns and a btree on
    expires_at, filled with the same rows (one table per baseline)."""
    psql("CREATE SCHEMA IF NOT EXISTS purge_copy")
    for name in names:
        psql(f"DROP TABLE IF EXISTS purge_copy.{name}; CREATE TABLE purge_copy.{name} ({PURGE_COPY_COLUMNS});"
             f" CREATE INDEX ON purge_copy.{name} (expires_at);"
             f" INSERT INTO purge_copy.{name} SELECT * FROM idempotency.idempotency_record WHERE namespace = 'purge'")
    psql("VACUUM ANALYZE idempotency.idempotency_record; " +
         "; ".join(f"VACUUM ANALYZE purge_copy.{name}" for name in names))


def timed_with_wal(sql, sync):
    """Runs sql alone in one session after a checkpoint (so that every run
    writes its pages' first images alike); returns (seconds, WAL bytes)."""
    psql("CHECKPOINT")
    start = psql("SELECT pg_current_wal_insert_lsn()")
    env = dict(os.environ, PGOPTIONS=f"-c synchronous_commit={sync}")
    began = time.time()
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-c", sql], env=env, check=True,
                   capture_output=True, text=True)
    took = time.time() - began
    return took, int(psql(f"SELECT pg_current_wal_insert_lsn() - '{start}'::pg_lsn"))


# The bare batched loop the issue measured: one transaction, as idem_purge.
BARE_LOOP = """DO $$DECLARE k bigint; BEGIN LOOP
    DELETE FROM purge_copy.loop WHERE ctid IN
        (SELECT ctid FROM purge_copy.loop WHERE expires_at < now() ORDER BY expires_at LIMIT 10000);
    GET DIAGNOSTICS k = ROW_COUNT; EXIT WHEN k < 10000; END LOOP; END$$"""


def purge_alone(n, sync):
    """n expired rows purged with nothing else running: idem_purge(10000)
    (one transaction) and idem_purge_batches(10000) (a commit per chunk),
    against the two baselines on plain copies of the same rows, in the same
    run: the bare batched ctid loop and one bare DELETE. Returns
    {name: (rows per s, WAL bytes per row)}."""
    out = {}
    for name, sql in (("idem_purge", "SELECT idempotency.idem_purge(10000)"),
                      ("idem_purge_batches", "CALL idempotency.idem_purge_batches(10000)")):
        bulk_load("purge", n, expired=True)
        if name == "idem_purge":
            purge_copies(["loop", "once"])
        took, wal = timed_with_wal(sql, sync)
        left = int(psql("SELECT count(*) FROM idempotency.idempotency_record WHERE namespace = 'purge'"))
        if left:
            sys.exit(f"{sql} left {left} expired rows")
        out[name] = (n / took, wal / n)
    for name, sql in (("bare batched loop", BARE_LOOP),
                      ("one bare DELETE", "DELETE FROM purge_copy.once WHERE expires_at < now()")):
        took, wal = timed_with_wal(sql, sync)
        out[name] = (n / took, wal / n)
    psql("DROP SCHEMA purge_copy CASCADE")
    return out


def purge_verdicts(row):
    """The issue's targets as PASS/MISS lines (never a failure of the run)."""
    def line(ok, text):
        print(f"    {'PASS' if ok else 'MISS'}  {text}", flush=True)
    alone = row["alone"]
    loop, once = alone["bare batched loop"][0], alone["one bare DELETE"][0]
    for name in ("idem_purge", "idem_purge_batches"):
        rate, wal = alone[name]
        print(f"    {name}(10000) alone: {rate:,.0f} rows/s, {wal:.0f} WAL bytes per row", flush=True)
    for name in ("bare batched loop", "one bare DELETE"):
        rate, wal = alone[name]
        print(f"    {name} on a plain copy: {rate:,.0f} rows/s, {wal:.0f} WAL bytes per row", flush=True)
    for name in ("idem_purge", "idem_purge_batches"):
        rate = alone[name][0]
        line(rate >= 2 * loop, f"{name}: {rate / loop:.2f}x the bare batched loop (target 2x)")
        line(rate >= 0.8 * once, f"{name}: {rate / once:.2f}x one bare DELETE (target 0.8x)")
    inserts = row["samples_during"] / row["purge_s"]
    line(row["rows_per_s"] >= inserts, f"under the load: purged {row['rows_per_s']:,.0f} rows/s, the load inserted"
         f" {inserts:,.0f} rows/s meanwhile (target: at least that)")
    line(row["p99_during_ms"] <= 1.2 * row["p99_hog_ms"],
         f"load p99 {row['p99_during_ms']:.2f} ms during the purge, {row['p99_during_ms'] / row['p99_hog_ms']:.2f}x"
         f" its p99 beside a CPU-bound statement as long (target 1.2x)")


def purge_scenario(rows, args):
    """Purge rate of n expired rows under a concurrent fresh-cycle load, and
    that load's p99 during the purge against the same load without it and
    beside a CPU-bound statement that runs as long as the purge did; before
    that, the purge alone against the bare baselines (purge_alone)."""
    for sync in ("off", "on"):
        alone = purge_alone(args.purge_rows, sync)
        baseline = pgbench("extension_fresh.sql", 4, args.purge_load, sync, {"ns": "purgeload", "nkeys": 0, "round": 0})
        bulk_load("purge", args.purge_rows, expired=True)
        took, during = load_while(sync, args.purge_load,
                                  [f"SET idempotency.purge_pause = '{args.purge_pause}'",
                                   f"CALL idempotency.idem_purge_batches({args.purge_batch})"])
        left = int(psql("SELECT count(*) FROM idempotency.idempotency_record WHERE namespace = 'purge'"))
        if left:
            sys.exit(f"purge left {left} expired rows")
        rate = args.purge_rows / took
        # The control: the same load beside one backend that only burns CPU
        # for as long as the purge took. On a machine whose cores the load
        # already keeps busy, any busy backend costs the load this much.
        _, hog = load_while(sync, args.purge_load, f"SET statement_timeout = {int(took * 1000)}; "
                            "DO $$DECLARE i bigint := 0; BEGIN LOOP i := i + 1; END LOOP; END$$", cancelled_ok=True)
        rows.append({"scenario": f"purge {args.purge_rows:,} rows ({args.purge_batch:,} a chunk, pause {args.purge_pause})", "sync": sync, "contender": "extension",
                     "tps": float("nan"), "mean_ms": float("nan"), "p99_ms": float("nan"),
                     "rows_per_s": rate, "p99_base_ms": percentile(baseline[1], 99),
                     "p99_during_ms": percentile(during, 99), "samples_during": len(during),
                     "p99_hog_ms": percentile(hog, 99), "purge_s": took, "alone": alone,
                     "wal_per_row": alone["idem_purge_batches"][1]})
        print_progress(rows)
        purge_verdicts(rows[-1])


def growth_scenario(rows, args):
    """Fresh-cycle and replay latency with n rows already in the table."""
    for n in args.growth:
        psql("TRUNCATE idempotency.idempotency_record")
        started = time.time()
        bulk_load("growth", n, expired=False)
        load_s = time.time() - started
        for sync in ("off", "on"):
            for scenario in ("fresh", "replay"):
                if scenario == "replay" and sync == "on":
                    continue
                runs = [run_contender("extension", scenario, 8, args.duration, sync, "growth", n)
                        for _ in range(args.reps)]
                summarize(rows, f"{scenario} with {n:,} rows", sync if scenario == "fresh" else "either (read-only)",
                          {"extension": runs})
        rows[-1]["load_s"] = load_s
        print_progress(rows)


# The store's autovacuum settings that docs/operations.md recommends (see
# "Autovacuum" there): the steady group runs with them unless
# --steady-reloptions says otherwise ("none": the server's defaults).
STEADY_RELOPTIONS = ("autovacuum_vacuum_scale_factor=0.02, autovacuum_vacuum_threshold=10000,"
                     " autovacuum_vacuum_cost_delay=0, autovacuum_analyze_scale_factor=0.05")


def steady_sample(table):
    """One sample of the store: sizes in bytes of the table (with TOAST, and
    its main fork) and of each index, live and dead rows, autovacuum runs."""
    out = psql(f"""SELECT pg_total_relation_size('{table}'::regclass), pg_relation_size('{table}'::regclass),
                          s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.n_tup_upd, s.n_tup_hot_upd,
                          (SELECT string_agg(i.indexrelid::regclass::text || '=' || pg_relation_size(i.indexrelid), ' '
                                             ORDER BY i.indexrelid::regclass::text)
                             FROM pg_index i WHERE i.indrelid = '{table}'::regclass)
                   FROM pg_stat_user_tables s WHERE s.relid = '{table}'::regclass""")
    total, heap, live, dead, vacuums, upd, hot, indexes = out.split("|")
    sample = {"total": int(total), "table": int(heap), "n_live_tup": int(live), "n_dead_tup": int(dead),
              "autovacuums": int(vacuums), "n_tup_upd": int(upd), "n_tup_hot_upd": int(hot)}
    for entry in indexes.split():
        name, size = entry.rsplit("=", 1)
        sample[name.split(".")[-1]] = int(size)
    return sample


def steady_load(sync, duration, started, span, windows):
    """The 4-client fresh-cycle load of the other groups (pgbench, namespace
    'steady') for duration seconds; returns (transactions, latencies in ms
    per window of span seconds from started, by transaction end). Reads
    pgbench's logs line by line into arrays: 30 minutes at 10,000 tps are
    18 million transactions."""
    import array
    env = dict(os.environ, PGOPTIONS=f"-c synchronous_commit={sync}")
    per = [array.array("d") for _ in range(windows)]
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(["pgbench", "-n", "-M", "prepared", "-c", "4", "-j", str(THREADS), "-T", str(duration),
                               "-f", str(SCRIPTS / "extension_fresh.sql"), "-D", "ns=steady",
                               "-l", "--log-prefix", f"{tmp}/log", DB], env=env, capture_output=True, text=True)
        failed = re.search(r"number of failed transactions: (\d+)", done.stdout)
        if done.returncode != 0 or (failed and int(failed.group(1)) > 0):
            sys.exit(f"pgbench extension_fresh.sql failed:\n{done.stdout}\n{done.stderr}")
        n = 0
        for log in pathlib.Path(tmp).glob("log*"):
            with open(log) as f:
                for line in f:
                    fields = line.split()
                    end = int(fields[4]) + int(fields[5]) / 1e6
                    per[min(windows - 1, max(0, int((end - started) // span)))].append(int(fields[2]) / 1000.0)
                    n += 1
    return n, per


def steady_scenario(rows, args):
    """A steady state: the 4-client fresh-cycle load for args.steady_s seconds
    in a namespace whose records expire after args.steady_window_s, the purge
    called every args.steady_purge_s seconds (as pg_cron would), autovacuum
    on with the table's settings of args.steady_reloptions. Samples the
    store's sizes every args.steady_sample_s seconds and compares the first
    and last windows (args.steady_compare_s): p99 of the load, and the sizes
    of the table and of each index. Prints PASS/MISS lines, never fails."""
    import threading
    table = "idempotency.idempotency_record"
    sync, duration, span = "off", args.steady_s, args.steady_compare_s
    if psql("SHOW autovacuum") != "on" or psql("SHOW track_counts") != "on":
        print("  steady: autovacuum or track_counts is off on this server: the group needs both", flush=True)
        return
    psql(f"TRUNCATE {table}")
    reloptions = "" if args.steady_reloptions == "none" else args.steady_reloptions
    if reloptions:
        psql(f"ALTER TABLE {table} SET ({reloptions})")
    psql(f"VACUUM ANALYZE {table}")
    psql(f"SELECT pg_stat_reset_single_table_counters('{table}'::regclass)")
    psql(f"SELECT idempotency.idem_namespace_configure('steady', replay_window => '{args.steady_window_s} seconds')")
    # The run compresses a replay window of hours into seconds; autovacuum's
    # naptime (1 minute by default) must shrink with it, or the run measures
    # only how much piles up between two of autovacuum's looks: a third of
    # the window, for this run only (reset below).
    naptime_s = int(psql("SELECT setting FROM pg_settings WHERE name = 'autovacuum_naptime'"))
    if naptime_s > args.steady_window_s // 3:
        psql(f"ALTER SYSTEM SET autovacuum_naptime = '{args.steady_window_s // 3}s'")
        psql("SELECT pg_reload_conf()")
        time.sleep(0.5)
    naptime = psql("SHOW autovacuum_naptime")
    print(f"  steady: {duration} s of the fresh cycle (4 clients, synchronous_commit={sync}), records kept"
          f" {args.steady_window_s} s, purge every {args.steady_purge_s} s, autovacuum_naptime={naptime},"
          f" table settings: {reloptions or 'the server defaults'}", flush=True)

    stop = threading.Event()
    samples, purges = [], []

    def sampler():
        while True:
            sample = steady_sample(table)
            sample["t"] = time.time() - started
            samples.append(sample)
            if stop.wait(args.steady_sample_s):
                return

    def purger():   # what pg_cron runs: a new session per call
        while not stop.wait(args.steady_purge_s):
            began = time.time()
            done = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-c",
                                   "CALL idempotency.idem_purge_batches(10000)"], capture_output=True, text=True)
            deleted = re.search(r"purged (\d+)", done.stderr) if done.returncode == 0 else None
            purges.append((began - started, time.time() - began, int(deleted.group(1)) if deleted else -1))

    started = time.time()
    threads = [threading.Thread(target=f, daemon=True) for f in (sampler, purger)]
    for t in threads:
        t.start()
    windows = max(1, int(round(duration / span)))
    try:
        n, per = steady_load(sync, duration, started, span, windows)
        end_sample = steady_sample(table)
        end_sample["t"] = time.time() - started
        samples.append(end_sample)
    finally:
        stop.set()
        for t in threads:
            t.join()
        if naptime_s > args.steady_window_s // 3:
            psql("ALTER SYSTEM RESET autovacuum_naptime")
            psql("SELECT pg_reload_conf()")
        if reloptions:
            psql(f"ALTER TABLE {table} RESET ({', '.join(o.split('=')[0].strip() for o in reloptions.split(','))})")

    first, last = per[0], per[-1]
    minutes = f"{span / 60:g} min" if span % 60 == 0 else f"{span:g} s"
    p99_first, p99_last = percentile(first, 99), percentile(last, 99)
    relations = [k for k in samples[0] if k not in ("t", "n_live_tup", "n_dead_tup", "autovacuums", "n_tup_upd",
                                                    "n_tup_hot_upd")]
    # Sizes: the first window's reference includes a warm-up of two replay
    # windows (the first records expire, are purged and vacuumed; a random-key
    # btree fills to its steady density), so that growth to the steady state
    # is not taken for steady growth; the last window's largest size may be
    # at most 1.25x that reference.
    reference_s = min(span + 2 * args.steady_window_s, duration - span)
    in_first = [s for s in samples if s["t"] <= reference_s]
    after = [s for s in samples if s["t"] > reference_s]
    in_last = [s for s in samples if s["t"] >= duration - span]
    mib = 2**20
    print(f"  steady: {n:,} transactions ({n / duration:,.0f} tps), {len(purges)} purges deleted"
          f" {sum(p[2] for p in purges if p[2] > 0):,} rows (longest {max((p[1] for p in purges), default=0):.1f} s),"
          f" {end_sample['autovacuums']} autovacuums, {end_sample['n_tup_hot_upd']:,} of"
          f" {end_sample['n_tup_upd']:,} updates HOT", flush=True)
    print("  p99 per window: " + ", ".join(f"{percentile(w, 99):.2f} ms" for w in per), flush=True)
    print(f"  sizes: at {reference_s:g} s, largest until then, largest after, largest in the last {minutes}:")
    print(f"  {'relation':<36} {'end of 1st':>10} {'max 1st':>9} {'max after':>10} {'max last':>9}"
          f" {'last/1st':>8}  (MiB)", flush=True)
    bounded = True
    for rel in relations:
        at_end = in_first[-1][rel] / mib
        max_first = max(s[rel] for s in in_first) / mib
        max_after = max((s[rel] for s in after), default=float("nan")) / mib
        max_last = max(s[rel] for s in in_last) / mib
        ratio = max_last / max_first if max_first else float("nan")
        bounded = bounded and not ratio > 1.25
        print(f"  {rel:<36} {at_end:>10.1f} {max_first:>9.1f} {max_after:>10.1f} {max_last:>9.1f} {ratio:>8.2f}",
              flush=True)
    print(f"  n_live_tup max {max(s['n_live_tup'] for s in samples):,}, n_dead_tup max"
          f" {max(s['n_dead_tup'] for s in samples):,} (first window {max(s['n_dead_tup'] for s in in_first):,},"
          f" last {max(s['n_dead_tup'] for s in in_last):,})", flush=True)
    ratio = p99_last / p99_first
    print(f"  {'PASS' if bounded else 'MISS'}  sizes bounded: every relation's largest size in the last {minutes}"
          f" is at most 1.25x its largest in the first {reference_s:g} s (first window and warm-up)", flush=True)
    print(f"  {'PASS' if ratio <= 1.5 else 'MISS'}  p99 stable: last {minutes} {p99_last:.2f} ms against first"
          f" {minutes} {p99_first:.2f} ms ({ratio:.2f}x; criterion at most 1.5x)", flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "steady.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["t"] + [k for k in samples[0] if k != "t"])
        w.writeheader()
        w.writerows(samples)
    total_first = max(s["total"] for s in in_first) / mib
    total_last = max(s["total"] for s in in_last) / mib
    for label, lat in ((f"steady, first {minutes}", first), (f"steady, last {minutes}", last)):
        rows.append({"scenario": label, "sync": sync, "contender": "extension", "tps": len(lat) / span,
                     "mean_ms": statistics.fmean(lat) if lat else float("nan"), "p99_ms": percentile(lat, 99),
                     "steady": True})
    # tps_range is the table's free-text column ("other").
    rows[-2]["tps_range"] = (f"store at most {total_first:.0f} MiB; {args.steady_window_s} s window, purge every"
                             f" {args.steady_purge_s} s, {reloptions or 'default autovacuum'}")
    rows[-1]["tps_range"] = (f"store at most {total_last:.0f} MiB ({total_last / total_first:.2f}x the first window's);"
                             f" p99 {ratio:.2f}x the first window's; {end_sample['autovacuums']} autovacuums in"
                             f" {duration / 60:g} min")
    print_progress(rows)


def wal_text(row):
    """The WAL and row versions of one contender's fresh cycle, in words."""
    return (f"{row['wal_bytes']:,.0f} WAL bytes of records + {row['fpi_bytes']:,.0f} of full-page images per cycle;"
            f" {row['dead_versions']:.2f} dead row versions per cycle ({row['hot']:.2f} HOT updates),"
            f" {row['dead_left']:.2f} left after pruning")


PRINTED = [0]
CONTENTION_COUNTS = {}


def print_progress(rows):
    for row in rows[PRINTED[0]:]:
        extra = ""
        if "mb_per_s" in row:
            extra = f"  {row['mb_per_s']:.1f} MB/s"
        if "us_per_cycle" in row:
            extra = f"  {row['us_per_cycle']:.1f} us per cycle"
        if "instructions" in row:
            extra = f"  {row['instructions']:,} instructions per cycle"
        if "wal_bytes" in row:
            extra = "  " + wal_text(row)
        if "rows_per_s" in row:
            extra = (f"  {row['rows_per_s']:,.0f} rows/s, load p99 {row['p99_during_ms']:.2f} ms during purge"
                     f" vs {row['p99_base_ms']:.2f} ms without, {row['p99_hog_ms']:.2f} ms beside a CPU-bound query")
        print(f"  {row['scenario']:<28} sync={row['sync']:<19} {row['contender']:<10}"
              f" tps={row['tps']:>9.0f} mean={row['mean_ms']:.3f}ms p99={row['p99_ms']:.3f}ms{extra}", flush=True)
    PRINTED[0] = len(rows)


def ratio_to_extension(rows):
    base = {(r["scenario"], r["sync"]): r["tps"] for r in rows if r["contender"] == "extension"}
    for r in rows:
        b = base.get((r["scenario"], r["sync"]))
        r["ratio"] = r["tps"] / b if b and not math.isnan(r["tps"]) else float("nan")


def write_outputs(rows, args, elapsed):
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ratio_to_extension(rows)
    fields = ["scenario", "sync", "contender", "tps", "mean_ms", "p99_ms", "ratio", "us_per_cycle", "instructions",
              "wal_bytes", "fpi_bytes", "dead_versions", "hot", "dead_left", "mb_per_s", "rows_per_s",
              "p99_base_ms", "p99_during_ms", "p99_hog_ms", "samples_during", "purge_s", "load_s"]
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    server = psql("SELECT version()")
    settings = psql("SELECT string_agg(name || '=' || current_setting(name), ', ' ORDER BY name) FROM pg_settings"
                    " WHERE name IN ('shared_buffers', 'max_wal_size', 'fsync', 'wal_level', 'checkpoint_timeout')")
    lines = [f"Run of `make bench{' ARGS=--quick' if args.quick else ''}` ({'quick' if args.quick else 'full'} mode,"
             f" {args.reps} repetitions of {args.duration} s per contender and scenario, alternating; medians),"
             f" {stamp()}, {elapsed / 60:.1f} minutes.", "",
             f"Machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
             f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, {platform.platform()}.",
             f"Server: {server}; {settings}. Clients: pgbench -M prepared (8 clients, 16 for contention) on the same machine.",
             "", "| scenario | synchronous_commit | contender | tps | mean ms | p99 ms | ratio to extension | other |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        other = ""
        if "mb_per_s" in r:
            other = f"{r['mb_per_s']:.1f} MB/s"
        if "us_per_cycle" in r:
            other = f"{r['us_per_cycle']:.1f} µs per cycle (CPU: no client)"
        if "instructions" in r:
            other = f"{r['instructions']:,} instructions per cycle (callgrind; tps column: cycles per 10^9 instructions)"
        if "wal_bytes" in r:
            other = wal_text(r)
        if "rows_per_s" in r:
            other = (f"{r['rows_per_s']:,.0f} rows/s ({r['purge_s']:.1f} s); load p99 {r['p99_during_ms']:.2f} ms during"
                     f" vs {r['p99_base_ms']:.2f} ms without ({r['p99_during_ms'] / r['p99_base_ms']:.2f}x,"
                     f" {r['samples_during']} transactions) and {r['p99_hog_ms']:.2f} ms beside a CPU-bound query"
                     f" as long as the purge ({r['p99_during_ms'] / r['p99_hog_ms']:.2f}x)")
        if "load_s" in r:
            other = f"table loaded in {r['load_s']:.0f} s"
        if "tps_range" in r:
            other = r["tps_range"]
        def num(v, fmt):
            return "" if math.isnan(v) else format(v, fmt)
        lines.append(f"| {r['scenario']} | {r['sync']} | {r['contender']} | {num(r['tps'], ',.0f')} |"
                     f" {num(r['mean_ms'], '.3f')} | {num(r['p99_ms'], '.3f')} | {num(r['ratio'], '.2f')} | {other} |")
    if WIRE_REPORT:
        lines += [""] + WIRE_REPORT
    if CONTENTION_COUNTS:
        lines += ["", "Contention outcomes per round (every round had exactly one fresh per key):", ""]
        for contender, rounds in CONTENTION_COUNTS.items():
            lines.append(f"- {contender}: " + "; ".join(rounds))
    (out / "results.md").write_text("\n".join(lines) + "\n")
    chart(rows, out)
    print("\n".join(lines[5:]))
    print(f"\nwrote {out / 'results.md'}, {out / 'results.csv'} and {out / 'chart.png'}")


def stamp():
    """The date and the commit a run measured (with "+ changes" when the tree
    differs from it), for the table and the chart: a published chart says
    what it shows."""
    here = pathlib.Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        commit = f"commit {commit}" + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        commit = "no git commit (not a checkout)"
    return f"{time.strftime('%Y-%m-%d')}, {commit}"


def chart(rows, out):
    """Throughput of each contender relative to the extension, per scenario."""
    picked = [r for r in rows if r["contender"] != "extension" and not math.isnan(r["ratio"])]
    scenarios = []
    for r in picked:
        name = r["scenario"] + ("" if r["sync"].startswith("either") else f" (sync {r['sync']})")
        if name not in scenarios:
            scenarios.append(name)
    contenders = [c for c in ("ceiling", "lean", "constrained", "plpgsql", "client", "built-in") if any(r["contender"] == c for r in picked)]
    if not contenders:
        return  # only groups without contenders ran: nothing to draw
    data = out / "chart.dat"
    with open(data, "w") as f:
        f.write("scenario " + " ".join(contenders) + "\n")
        for s in scenarios:
            vals = []
            for c in contenders:
                match = [r["ratio"] for r in picked if r["contender"] == c and
                         r["scenario"] + ("" if r["sync"].startswith("either") else f" (sync {r['sync']})") == s]
                vals.append(f"{match[0]:.3f}" if match else "NaN")
            f.write('"' + s + '" ' + " ".join(vals) + "\n")
    plot = f"""set terminal pngcairo size 1100,520 font ",10"
set output "{out / 'chart.png'}"
set title "Throughput relative to the extension (1.0 = as fast; below 1 = slower than the extension)\\nmake bench, {stamp()}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:*]
set grid ytics
set xtics rotate by -25 scale 0
set key outside right top
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2 lc rgb "black"
plot for [i=2:{len(contenders) + 1}] "{data}" using i:xtic(1) title columnheader(i)
"""
    subprocess.run(["gnuplot"], input=plot, text=True, check=True)


def main():
    global DB, THREADS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs and small tables, for iteration")
    parser.add_argument("--only",
                        default="cycle,inbackend,instructions,wire,decisions,counters,fingerprint,purge,growth,steady",
                        help="comma-separated scenario groups: cycle, inbackend, instructions, wire, decisions,"
                             " counters, fingerprint, purge, growth, steady; and, not by default, portable")
    parser.add_argument("--slow", action="store_true", default=os.environ.get("SLOW") == "1",
                        help="the long versions (make bench SLOW=1): steady runs 30 minutes")
    parser.add_argument("--steady-seconds", type=int, dest="steady_s",
                        help="length of the steady group's run (default 240 s; 120 with --quick, 1800 with --slow)")
    parser.add_argument("--steady-reloptions", default=STEADY_RELOPTIONS,
                        help="the table's settings for the steady group (ALTER TABLE ... SET); none: the server's")
    parser.add_argument("--purge-batch", type=int, default=2000, dest="purge_batch",
                        help="the purge group's idem_purge_batches batch_size under the load")
    parser.add_argument("--purge-pause", default="20ms", dest="purge_pause",
                        help="the purge group's idempotency.purge_pause under the load (e.g. 20ms)")
    parser.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args()
    if args.quick:
        args.duration, args.reps, args.nkeys, args.fingerprint_duration = 2, 2, 10000, 2
        args.purge_rows, args.purge_load, args.growth = 100000, 6, [10**4, 10**5]
        args.inbackend_cycles = 5000
    else:
        args.duration, args.reps, args.nkeys, args.fingerprint_duration = 5, 3, 100000, 3
        args.purge_rows, args.purge_load, args.growth = 1000000, 20, [10**5, 10**7]
        args.inbackend_cycles = 20000
    # steady: the run, the windows it compares (first and last), how long
    # records are kept, how often the purge runs and the sizes are sampled.
    if args.slow:
        args.steady_s, args.steady_compare_s, args.steady_sample_s = args.steady_s or 1800, 300, 15
    elif args.quick:
        args.steady_s, args.steady_compare_s, args.steady_sample_s = args.steady_s or 120, 30, 5
    else:
        args.steady_s, args.steady_compare_s, args.steady_sample_s = args.steady_s or 240, 60, 5
    args.steady_compare_s = min(args.steady_compare_s, args.steady_s / 2)
    args.steady_window_s, args.steady_purge_s = 30, 10
    THREADS = max(2, os.cpu_count() or 2)
    DB = "idempotency_bench"
    started = time.time()
    psql(f"DROP DATABASE IF EXISTS {DB}", db="postgres")
    psql(f"CREATE DATABASE {DB}", db="postgres")
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", str(HERE / "contenders.sql")],
                   check=True, capture_output=True)
    rows = []
    groups = args.only.split(",")
    print(f"benchmark ({'quick' if args.quick else 'full'}): {', '.join(groups)}", flush=True)
    if "cycle" in groups or "inbackend" in groups:
        prepopulate(args.nkeys)
    if "cycle" in groups:
        cycle_scenarios(rows, args)
    if "inbackend" in groups:
        inbackend_scenario(rows, args)
    if "instructions" in groups:
        instructions_scenario(rows, args)
    if "wire" in groups:
        wire_scenario(rows, args)
    if "decisions" in groups:
        decisions_scenario(rows, args)
    if "portable" in groups:
        portable_scenario(rows, args)
    if "counters" in groups:
        counters_scenario(rows, args)
    if "fingerprint" in groups:
        fingerprint_scenario(rows, args)
    if "purge" in groups:
        purge_scenario(rows, args)
    if "growth" in groups:
        growth_scenario(rows, args)
    if "steady" in groups:
        steady_scenario(rows, args)
    write_outputs(rows, args, time.time() - started)


DB = THREADS = None
if __name__ == "__main__":
    main()
