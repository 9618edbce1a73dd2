"""Tables (markdown) and plots (PNG) from the suite's JSON report.

``markdown(report) -> str`` and ``plots(report, out_dir) -> [paths]``.
Ratios: "k/t" is kafkapy / tansu (> 1: kafkapy faster, or for CPU and
latency, kafkapy uses more); "of limit" is kafkapy's MB/s over the machine
limit that bounds that path (produce: the lower of loopback TCP and
page-cache write; consume: os.sendfile from the page cache; small requests:
the Python ping-pong round-trip rate).
"""

from __future__ import annotations

from pathlib import Path


def _med(row: dict | None, key: str):
    if not row:
        return None
    v = row.get(key)
    if isinstance(v, dict):
        return v.get("median")
    return v


def _ratio(a, b, digits: int = 2) -> str:
    if a is None or b is None or not b:
        return "—"
    return f"{a / b:.{digits}f}"


def _k(v) -> str:
    return "—" if v is None else f"{v / 1000:,.0f} k"


def _rate_cell(row: dict | None, key: str = "records_per_s") -> str:
    if row is None:
        return "—"
    if row.get("ok_runs") == 0 or row.get("error") and not row.get(key):
        return "failed: " + str(row.get("error", ""))[:60].replace("|", "/")
    s = row.get(key) or {}
    mb = (row.get("mb_per_s") or {}).get("median")
    if s.get("median") is None:
        return "—"
    txt = f"{_k(s['median'])}/s ({_k(s['min'])}–{_k(s['max'])})"
    if mb is not None:
        txt += f", {mb:,.0f} MB/s"
    return txt


def _index(results: list[dict], section: str) -> tuple[list, dict]:
    order, by = [], {}
    for r in results:
        if r.get("section") != section:
            continue
        key = (r["id"], r.get("client"))
        if key not in order:
            order.append(key)
        by[key + (r["broker"],)] = r
    return order, by


def limit_for(kind: str, limits: dict):
    def mb(name):
        return (limits.get(name) or {}).get("mb_per_s")
    if kind == "produce":
        vals = [v for v in (mb("loopback_tcp"), mb("write_no_fsync")) if v]
        return min(vals) if vals else None
    if kind == "consume":
        return mb("sendfile")
    return None


def _ms(us) -> str:
    return "—" if us is None else f"{us / 1000:.2f}"


def targets(report: dict) -> list[tuple[str, str, str]]:
    res = report["results"]
    out = []

    def pairs(section, key):
        order, by = _index(res, section)
        for wid, client in order:
            k, t = by.get((wid, client, "kafkapy")), by.get((wid, client, "tansu"))
            a, b = _med(k, key), _med(t, key)
            if a is not None and b:
                yield f"{wid} ({client})", a / b

    for section in ("produce", "consume"):
        rs = list(pairs(section, "records_per_s"))
        if rs:
            worst = min(rs, key=lambda x: x[1])
            misses = [r for r in rs if r[1] < 1.0]
            out.append((f"{section} throughput ≥ 1.0× tansu, every workload",
                        f"{len(rs) - len(misses)}/{len(rs)} met; worst {worst[1]:.2f}× ({worst[0]})",
                        "met" if not misses else f"missed on {len(misses)}"))
    for section, limit in (("produce", 1.0), ("consume", 0.5)):
        rs = list(pairs(section, "cpu_s_per_gb"))
        if rs:
            worst = max(rs, key=lambda x: x[1])
            misses = [r for r in rs if r[1] > limit]
            out.append((f"{section} CPU/GB ≤ {limit}× tansu",
                        f"{len(rs) - len(misses)}/{len(rs)} met; worst {worst[1]:.2f}× ({worst[0]})",
                        "met" if not misses else f"missed on {len(misses)}"))
    small = [r for r in res if r.get("section") == "small" and r["broker"] == "kafkapy"
             and r.get("inflight") == 1]
    if small:
        r = small[0]
        rps, p99 = _med(r, "requests_per_s"), _med(r, "p99_us")
        ok = rps is not None and p99 is not None and rps >= 10_000 and p99 < 2000
        out.append(("small requests ≥ 10,000 req/s, p99 < 2 ms (1 conn, 1 in flight)",
                    f"{rps or 0:,.0f} req/s, p99 {_ms(p99)} ms",
                    "met" if ok else f"missed: {(rps or 0) / 10_000:.2f}× the rate"))
    e2e = [r for r in res if r.get("section") == "e2e" and r["broker"] == "kafkapy"
           and r.get("rate") == 10_000]
    if e2e:
        p99 = _med(e2e[0], "p99_us")
        out.append(("end-to-end p99 < 5 ms at 10k rec/s of 1 KiB", f"p99 {_ms(p99)} ms",
                    "met" if p99 is not None and p99 < 5000 else "missed"))
    parts = {r["partitions"]: r for r in res if r.get("section") == "partitions"
             and r["broker"] == "kafkapy" and "partitions" in r}
    if 1 in parts and 10_000 in parts:
        fixed_1 = {f["offered_rate"]: f for f in parts[1].get("fixed_rates", [])}
        for fa in parts[10_000].get("fixed_rates", []):
            fb = fixed_1.get(fa["offered_rate"], {})
            a, b = fa.get("achieved_rate"), fb.get("achieved_rate")
            if not (a and b):
                continue
            ok = a / b >= 0.8 and "error" not in fa
            out.append((f"10,000 partitions: produce ≥ 0.8× the 1-partition figure at the "
                        f"same total rate ({fa['offered_rate']:,} rec/s offered)",
                        f"{a / b:.2f}× ({a:,.0f} vs {b:,.0f} rec/s; due→ack p99 "
                        f"{_ms(fa.get('due_to_ack_p99_us'))} vs "
                        f"{_ms(fb.get('due_to_ack_p99_us'))} ms)",
                        "met" if ok else "missed"))
        a, b = parts[10_000].get("records_per_s"), parts[1].get("records_per_s")
        if a and b:
            out.append(("(for reference) 10,000 partitions at each one's maximum rate",
                        f"{a / b:.2f}× ({a:,.0f} vs {b:,.0f} rec/s)",
                        "the load generator's limit; see Partition scaling"))
        s = parts[10_000].get("startup_s")
        out.append(("10,000 partitions: start-up < 10 s with data in every partition",
                    f"{s} s" if s is not None else
                    parts[10_000].get("startup_error", "—").splitlines()[0][:80],
                    "met" if s is not None and s < 10 else "missed"))
    return out


def markdown(report: dict) -> str:
    m = report["machine"]
    limits = report.get("limits", {})
    res = report["results"]
    L = [f"# kafkapy performance suite{' (quick)' if report.get('quick') else ''}", "",
         f"Machine: {m['nproc']} cores, {m['cpu_model']}, {m['mem_gb']} GB RAM, Linux "
         f"{m['kernel']}, Python {m['python']}; {m['client']}; "
         + "; ".join(f"{k} = {v}" for k, v in m.get("kcat", {}).items())
         + f"; {m['tansu']} (memory storage); kafkapy {m.get('kafkapy_commit', 'worktree')}"
         + (f" with {', '.join(m['kafkapy_config'])}" if m.get("kafkapy_config") else
            " with Kafka's defaults")
         + "; "
         f"{m['date_utc']}; load average at start "
         f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_at_start', []))}, at end "
         f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_at_end', []))}; "
         f"{report['repeat']} runs per workload, median (min–max); "
         f"suite took {report.get('elapsed_s', 0) / 60:.1f} min.", ""]
    for note in report.get("notes", []):
        L.append(f"- {note}")
    L.append("")

    L += ["## Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    L += [f"| {a} | {b} | {c} |" for a, b, c in targets(report)]
    L.append("")

    if limits:
        L += ["## Machine limits", "", "| limit | figure | how |", "|---|---|---|"]
        for name, v in limits.items():
            if v.get("round_trips_per_s"):
                fig = (f"{v['round_trips_per_s']:,.0f} round trips/s, p50 {v['p50_us']} µs, "
                       f"p99 {v['p99_us']} µs")
            elif v.get("mb_per_s"):
                fig = f"{v['mb_per_s']:,.0f} MB/s"
            else:
                fig = f"failed: {v.get('error')}"
            L.append(f"| {name} | {fig} | {v.get('method', '')} (load {v.get('loadavg_1m')}) |")
        L.append("")

    for section in ("produce", "consume"):
        order, by = _index(res, section)
        if not order:
            continue
        lim = limit_for(section, limits)
        L += [f"## {section.capitalize()} throughput and CPU", "",
              "Records/s median (min–max) and MB/s of record values; CPU = broker CPU "
              "seconds per GB of values; 'of limit' = kafkapy MB/s over the "
              + ("lower of loopback TCP and page-cache write" if section == "produce"
                 else "os.sendfile limit") + (f" ({lim:,.0f} MB/s)." if lim else "."), "",
              "| workload | client | kafkapy | tansu | k/t | of limit | kafkapy CPU s/GB | "
              "tansu CPU s/GB | CPU k/t | load |", "|---|---|---|---|---|---|---|---|---|---|"]
        for wid, client in order:
            k, t = by.get((wid, client, "kafkapy")), by.get((wid, client, "tansu"))
            tcell = _rate_cell(t) if t else (
                "n/a (librdkafka 2.0.2 cannot parse tansu's ApiVersions v3)"
                if client == "kcat" else "—")
            kmb = _med(k, "mb_per_s")
            load = _med(k, "loadavg_1m")
            kc, tc = _med(k, "cpu_s_per_gb"), _med(t, "cpu_s_per_gb")
            L.append(f"| {wid} | {client} | {_rate_cell(k)} | {tcell} | "
                     f"{_ratio(_med(k, 'records_per_s'), _med(t, 'records_per_s'))} | "
                     f"{_ratio(kmb, lim)} | {'—' if kc is None else f'{kc:.1f}'} | "
                     f"{'—' if tc is None else f'{tc:.1f}'} | {_ratio(kc, tc)} | "
                     f"{'—' if load is None else load} |")
        L.append("")

    order, by = _index(res, "e2e")
    if order:
        L += ["## End-to-end latency (produce timestamp to consume), 1 KiB, 1 partition",
              "", "confluent-kafka producer (linger.ms=1, max.in.flight 5, acks=1) and consumer in separate "
              "processes; ms, median of runs (min–max of p99).", "",
              "| rate | kafkapy p50 / p99 / p99.9 | tansu p50 / p99 / p99.9 | p99 k/t | "
              "achieved rate k / t | load |", "|---|---|---|---|---|---|"]
        for wid, client in order:
            k, t = by.get((wid, client, "kafkapy")), by.get((wid, client, "tansu"))

            def cell(r):
                if not r or r.get("ok_runs") == 0:
                    return "failed: " + str((r or {}).get("error", ""))[:60] if r else "—"
                p99 = r["p99_us"]
                return (f"{_ms(_med(r, 'p50_us'))} / {_ms(p99['median'])} "
                        f"({_ms(p99['min'])}–{_ms(p99['max'])}) / {_ms(_med(r, 'p999_us'))}")
            L.append(f"| {wid.split('@')[1].strip()} | {cell(k)} | {cell(t)} | "
                     f"{_ratio(_med(k, 'p99_us'), _med(t, 'p99_us'))} | "
                     f"{_k(_med(k, 'achieved_rate'))} / {_k(_med(t, 'achieved_rate'))} | "
                     f"{_med(k, 'loadavg_1m')} |")
        L.append("")

    order, by = _index(res, "small")
    if order:
        rt = (limits.get("round_trip") or {}).get("round_trips_per_s")
        L += ["## Small requests (one 100 B record per Produce v8 request, acks=1, one "
              "connection, raw socket)", "",
              "| in flight | kafkapy req/s | p50 / p99 / p99.9 ms | broker CPU µs/req | "
              "tansu req/s | p50 / p99 / p99.9 ms | tansu CPU µs/req | k/t | of round-trip limit |",
              "|---|---|---|---|---|---|---|---|---|"]
        for wid, client in order:
            k, t = by.get((wid, client, "kafkapy")), by.get((wid, client, "tansu"))

            def lat(r):
                if not r or r.get("ok_runs") == 0:
                    return "—"
                return " / ".join(_ms(_med(r, x)) for x in ("p50_us", "p99_us", "p999_us"))
            kr, tr = _med(k, "requests_per_s"), _med(t, "requests_per_s")
            L.append(f"| {(k or t or {}).get('inflight')} | {_rate_cell(k, 'requests_per_s')} | "
                     f"{lat(k)} | {_med(k, 'broker_cpu_us_per_request')} | "
                     f"{_rate_cell(t, 'requests_per_s')} | {lat(t)} | "
                     f"{_med(t, 'broker_cpu_us_per_request')} | {_ratio(kr, tr)} | "
                     f"{_ratio(kr, rt) if (k or {}).get('inflight') == 1 else '—'} |")
        L.append("")

    order, by = _index(res, "connections")
    if order:
        L += ["## Connections (one process, one request in flight per connection)", "",
              "| connections | kafkapy req/s | p99 ms | kafkapy PSS MB | tansu req/s | p99 ms | "
              "tansu PSS MB | k/t |", "|---|---|---|---|---|---|---|---|"]
        for wid, client in order:
            k, t = by.get((wid, client, "kafkapy")) or {}, by.get((wid, client, "tansu")) or {}

            def c(r, key):
                if r.get("error"):
                    return "failed: " + r["error"][:50]
                v = r.get(key)
                return "—" if v is None else f"{v:,.0f}"
            L.append(f"| {(k or t).get('connections', 0):,} | {c(k, 'requests_per_s')} | "
                     f"{_ms(k.get('p99_us'))} | {(k.get('broker_pss_bytes') or 0) / 1e6:.0f} | "
                     f"{c(t, 'requests_per_s')} | {_ms(t.get('p99_us'))} | "
                     f"{(t.get('broker_pss_bytes') or 0) / 1e6:.0f} | "
                     f"{_ratio(k.get('requests_per_s'), t.get('requests_per_s'))} |")
        L.append("")

    parts = [r for r in res if r.get("section") == "partitions" and "partitions" in r]
    if parts:
        base = {r["broker"]: r.get("records_per_s") for r in parts if r["partitions"] == 1}
        L += ["## Partition scaling (fresh broker; 100 B records round-robin over the "
              "topic's partitions, confluent-kafka, acks=1)", "",
              "| partitions | broker | records | rec/s | vs 1 partition | create topic s | "
              "PSS MB | start-up s (all partitions so far) | load |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(parts, key=lambda r: (r["partitions"], r["broker"])):
            rps = r.get("records_per_s")
            start = r.get("startup_s")
            if start is None:
                start = ("n/a (memory storage)" if r["broker"] == "tansu"
                         else r.get("startup_error", "—").splitlines()[0][:60])
            else:
                start = f"{start} ({r.get('total_partitions', 0):,})"
            L.append(f"| {r['partitions']:,} | {r['broker']} | {r.get('records', 0):,} | "
                     f"{'failed: ' + r['error'][:60] if r.get('error') else _k(rps) + '/s'} | "
                     f"{_ratio(rps, base.get(r['broker']))} | {r.get('create_topic_s', '—')} | "
                     f"{(r.get('broker_pss_bytes') or 0) / 1e6:.0f} | {start} | "
                     f"{r.get('loadavg_1m')} |")
        L.append("")
        fixed = [(r, f) for r in parts for f in r.get("fixed_rates", [])]
        if fixed:
            fbase = {(r["broker"], f["offered_rate"]): f.get("achieved_rate")
                     for r, f in fixed if r["partitions"] == 1}
            L += ["Fixed total rates, run first on each cold topic: a raw generator "
                  "(perf/_loadgens.py `spread`: linger 5 ms, 5 requests in flight, acks=1, "
                  "100 B, record i to partition i mod n, one batch per partition per "
                  "request); due→ack is from the tick a record became due to its "
                  "acknowledgement; CPU in seconds over the run:", "",
                  "| offered rec/s | partitions | broker | achieved rec/s | vs 1 partition | "
                  "due→ack p50 / p99 / p99.9 ms | requests | broker CPU s | generator CPU s |",
                  "|---|---|---|---|---|---|---|---|---|"]
            for r, f in sorted(fixed, key=lambda rf: (rf[1]["offered_rate"], rf[0]["partitions"],
                                                       rf[0]["broker"])):
                got = f.get("achieved_rate")
                L.append(f"| {f['offered_rate']:,} | {r['partitions']:,} | {r['broker']} | "
                         f"{'failed: ' + f['error'][:60] if f.get('error') else f'{got:,.0f}'} | "
                         f"{_ratio(got, fbase.get((r['broker'], f['offered_rate'])))} | "
                         f"{_ms(f.get('due_to_ack_p50_us'))} / {_ms(f.get('due_to_ack_p99_us'))} / "
                         f"{_ms(f.get('due_to_ack_p999_us'))} | {f.get('requests', '—')} | "
                         f"{f.get('broker_cpu_s')} | {f.get('generator_cpu_s')} |")
            L.append("")

    prof = report.get("profiles") or {}
    if prof:
        L += ["## Profiles (py-spy, CPU samples, top frames by self time)", ""]
        for phase, kinds in prof.items():
            if not isinstance(kinds, dict):
                continue
            L.append(f"### {phase}: {kinds.get('_load', '')}")
            L.append("")
            for kind in ("worker", "processor", "acceptor", "supervisor", "coordinator", "other"):
                k = kinds.get(kind)
                if not k:
                    continue
                L.append(f"**{kind}** ({k['processes']} processes, {k['samples']} samples)")
                L.append("")
                L += [f"- {share * 100:.1f}% {frame}" for frame, share in k["top_self"][:8]]
                L.append("")
                L.append("  inclusive (kafkapy frames): " + "; ".join(
                    f"{frame} {share * 100:.0f}%" for frame, share in
                    [x for x in k["top_inclusive_kafkapy"] if x[1] < 0.9][:6]))
                L.append("")
    # A log tail inside a cell would break the table.
    return "\n".join(line if not line.startswith("|") else line for line in
                     "\n".join(L).split("\n")) + "\n"


# ---------------------------------------------------------------- plots

def plots(report: dict, out_dir: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    res = report["results"]
    colors = {"kafkapy": "#1f77b4", "tansu": "#ff7f0e"}

    # 1. throughput bars, produce and consume, with min-max whiskers.
    for metric, fname, xlabel in (("mb_per_s", "suite_throughput.png", "MB/s of record values"),
                                  ("cpu_s_per_gb", "suite_cpu.png",
                                   "broker CPU seconds per GB (lower is better)")):
        rows = []
        for section in ("produce", "consume"):
            order, by = _index(res, section)
            for wid, client in order:
                if client == "kcat":
                    continue   # Debian kcat has no tansu counterpart
                rows.append((f"{wid} [{client}]", by.get((wid, client, "kafkapy")),
                             by.get((wid, client, "tansu"))))
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(11, 0.42 * len(rows) + 1.5))
        h = 0.38
        for i, (label, k, t) in enumerate(rows):
            for j, (name, r) in enumerate((("kafkapy", k), ("tansu", t))):
                s = (r or {}).get(metric) or {}
                if s.get("median") is None:
                    continue
                y = i + (j - 0.5) * h
                ax.barh(y, s["median"], height=h, color=colors[name],
                        label=name if i == 0 or not ax.get_legend_handles_labels()[1].count(name)
                        else None)
                ax.plot([s["min"], s["max"]], [y, y], color="black", lw=1)
                ax.text(s["median"], y, f" {s['median']:,.1f}", va="center", fontsize=7)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r[0] for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel + " (bar: median, line: min–max)")
        lim = report.get("limits", {})
        if metric == "mb_per_s":
            for name, style in (("loopback_tcp", ":"), ("write_no_fsync", "--"),
                                ("sendfile", "-.")):
                v = (lim.get(name) or {}).get("mb_per_s")
                if v and v < 4 * max(((r[1] or {}).get(metric) or {}).get("max") or 0
                                     for r in rows):
                    ax.axvline(v, color="grey", ls=style, lw=1, label=f"limit: {name} {v:,.0f}")
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), loc="lower right", fontsize=8)
        ax.set_title(("Throughput" if metric == "mb_per_s" else "Broker CPU per GB")
                     + ": kafkapy vs tansu")
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)

    # 2. latency percentiles over time, one panel per rate (first ok run).
    e2e = [r for r in res if r.get("section") == "e2e"]
    rates = sorted({r["rate"] for r in e2e})
    if rates:
        fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False)
        for ax, rate in zip(axes[0], rates):
            for r in e2e:
                if r["rate"] != rate:
                    continue
                run = next((x for x in r.get("runs", []) if "error" not in x), None)
                if not run:
                    continue
                series = run["consumer"]["series"]
                xs = [p["second"] for p in series]
                for key, style in (("p50_us", "-"), ("p99_us", "--"), ("p999_us", ":")):
                    ax.plot(xs, [p.get(key, 0) / 1000 for p in series], style,
                            color=colors[r["broker"]], label=f"{r['broker']} {key[:-3]}")
            ax.axhline(5, color="red", lw=0.8, alpha=0.5)
            ax.set_yscale("log")
            ax.set_title(f"{rate:,} rec/s of 1 KiB")
            ax.set_xlabel("second of the run")
            ax.set_ylabel("end-to-end latency, ms (log)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("End-to-end latency percentiles per second (red line: 5 ms target)")
        fig.tight_layout()
        path = out_dir / "suite_latency.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)

    # 3. partition scaling.
    parts = [r for r in res if r.get("section") == "partitions" and "partitions" in r]
    if parts:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        for name in ("kafkapy", "tansu"):
            rs = sorted((r for r in parts if r["broker"] == name and r.get("records_per_s")),
                        key=lambda r: r["partitions"])
            if rs:
                a1.plot([r["partitions"] for r in rs], [r["records_per_s"] / 1000 for r in rs],
                        "o-", color=colors[name], label=f"{name} max (confluent-kafka)")
                a2.plot([r["partitions"] for r in rs],
                        [(r.get("broker_pss_bytes") or 0) / 1e6 for r in rs], "o-",
                        color=colors[name], label=f"{name} PSS MB")
            offered = sorted({f["offered_rate"] for r in parts for f in r.get("fixed_rates", [])})
            for style, rate in zip(("s--", "^:", "d-."), offered):
                fr = sorted(((r["partitions"], f.get("achieved_rate")) for r in parts
                             if r["broker"] == name for f in r.get("fixed_rates", [])
                             if f["offered_rate"] == rate and f.get("achieved_rate")))
                if fr:
                    a1.plot([x for x, _ in fr], [y / 1000 for _, y in fr], style,
                            color=colors[name], label=f"{name} at {rate // 1000}k/s offered")
            st = [r for r in parts if r["broker"] == name and r.get("startup_s") is not None]
            if st:
                a2.plot([r["partitions"] for r in st], [r["startup_s"] * 100 for r in st],
                        "s--", color=colors[name], label=f"{name} start-up (s x100)")
        for ax in (a1, a2):
            ax.set_xscale("log")
            ax.set_xlabel("partitions in the topic")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        a1.set_yscale("log")  # the offered rates sit far below the maxima
        a1.set_ylabel("produce k records/s (100 B)")
        a1.set_title("Produce throughput vs partitions (max, and fixed offered rates)")
        a2.set_title("Memory (PSS) and start-up time")
        fig.tight_layout()
        path = out_dir / "suite_partitions.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out
