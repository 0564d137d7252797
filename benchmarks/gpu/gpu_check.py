"""GPU check: every CUDA path of ding_dist that one GPU can run, one markdown table (at most 8 minutes on one H200).

    bash benchmarks/gpu/gpu_check.sh --out-dir gpu_results        # on a machine with a GPU (default: --device cuda)
    bash benchmarks/gpu/gpu_check.sh --device cpu --quick         # every check that can run on a CPU, tiny sizes (CI)
    python benchmarks/gpu/gpu_check.py --only a1,c1               # some checks only (ids as in the table)
    bash benchmarks/gpu/gpu_check.sh --out-dir gpu_results --rerun-failed   # the rows that failed last time here

Rows (see benchmarks/gpu/README.md): (a) 1-process pipelines on the device (DQN, PPO, SAC, IMPALA; PPO
with ``policy.device=auto``), (b) 2 ranks on the one GPU over gloo (engine vs torch DDP, pipeline collectives
on ``cuda:gloo``, tests/comm/test_devices.py, ``ding-dist train`` on 2 ranks), (c) a world-of-one nccl group
through every collective and ``distribute``, (d) learner updates/s GPU vs CPU, (e) engine vs DDP step time,
(f) the actor-learner mode: CPU actors, learners on the GPU (DQN, IMPALA, PPO with ``auto``, 2 learners),
(g) image policies (Nature-CNN, frame replay) and observation normalization, (h) the looser sync algorithms
on 2 ranks with CUDA tensors (``cuda:gloo``), (n) nccl point-to-point on 2 GPUs (skipped with one).

Each check runs in its own process (forked from a server that imported torch once, never CUDA): an error, a
crash or a timeout is reported in its row and the others still run. The table goes to stdout and to
``DIR/gpu_check.md`` (``--out-dir DIR``; else ``--out FILE`` or a temporary file it names); each check's output to
a log beside it (with ``--out-dir``: one archive, ``DIR/gpu_check_logs.tar.gz``, so the folder holds four files to
copy back from an offline machine).
Exit status: 0 all rows ok or skipped, 1 a row failed, 2 no GPU (without ``--device cpu``) or nothing to rerun.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpu_check_lib as lib  # noqa: E402
import torch  # noqa: E402

CHECK_TIMEOUT_S = 240.0  # one check; a hung collective ends here, not at the 30-minute default
BUDGET_S = 420.0  # all checks, after a ~10 s start: with the wheel install, the run ends within 8 minutes
# the last run's failed row ids, for --rerun-failed (GPU_CHECK_FAILED_FILE: elsewhere, e.g. in tests)
FAILED_FILE = os.environ.get("GPU_CHECK_FAILED_FILE") or os.path.join(tempfile.gettempdir(), "gpu_check_failed.txt")
RERUN = "bash benchmarks/gpu/gpu_check.sh --only {ids}"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _run_one(mpc, check_id: str, ctx: lib.Ctx, log_path: str, timeout: float) -> tuple[list[dict], float]:
    default_name, _, _, row_ids = {**lib.CHECKS, **lib.SELF_TEST}[check_id]
    recv, send = mpc.Pipe(duplex=False)
    proc = mpc.Process(target=lib.run_child, args=(check_id, ctx, log_path, send), name=f"gpu_check-{check_id}")
    t0 = time.perf_counter()
    proc.start()
    send.close()
    message = None
    deadline = t0 + timeout
    while True:
        if recv.poll(0.2):
            try:
                message = recv.recv()
            except EOFError:  # the process closed its end without a word: it died
                pass
            break
        if not proc.is_alive() or time.perf_counter() > deadline:
            break
    if message is None:  # dead or hung: give a dying process a moment to be reaped
        proc.join(max(0.0, min(5.0, deadline - time.perf_counter())))
    timed_out = message is None and proc.is_alive()
    if timed_out:
        proc.terminate()  # SIGTERM -> SystemExit in the check: launch() stops its ranks on the way out
        proc.join(10)
    if proc.is_alive():
        proc.kill()
    proc.join()
    seconds = time.perf_counter() - t0
    recv.close()
    if message is not None and message[0] == "ok":
        return message[1], seconds
    if message is not None:
        error = message[1]
    elif timed_out:
        error = f"timed out after {timeout:.0f} s"
    else:
        code = proc.exitcode
        error = f"its process exited with code {code}" + (
            " (killed by a signal)" if code is not None and code < 0 else ""
        )
    error += f" (log: {log_path})"
    return [
        lib.row(rid, default_name if i == 0 else f"{default_name} (part {i + 1})", error, "FAIL")
        for i, rid in enumerate(row_ids)
    ], seconds


def _start_forkserver(ctx: lib.Ctx, log_dir: str):
    """Each check forks from one server that imported torch and ding_dist once (saves seconds per check).

    The server must never initialize CUDA, or a forked child could not use it: while it starts,
    torch.cuda.is_available() is answered from NVML should anything ask (the checks unset that), and on a
    machine with CUDA it does not preload torch._dynamo (what a torch optimizer imports at its first call). A
    warm-up check asks torch whether CUDA can start in a child; if not, every check is spawned afresh instead.
    """
    import multiprocessing.forkserver

    mpc = mp.get_context("forkserver")
    preload = ["torch", "ding_dist", "ding_dist.entry", "gpu_check_lib"]
    if not torch.cuda.is_available():
        preload.insert(1, "torch._dynamo")
    mpc.set_forkserver_preload(preload)
    old = os.environ.get(lib.NVML_CHECK_ENV)
    os.environ[lib.NVML_CHECK_ENV] = "1"
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if old is None:
            os.environ.pop(lib.NVML_CHECK_ENV)
        else:
            os.environ[lib.NVML_CHECK_ENV] = old
    got, _ = _run_one(mpc, "z4", ctx, os.path.join(log_dir, "warmup.log"), 120.0)
    if got[0]["figure"] != "ok":
        print(f"gpu_check: checks forked from the server cannot use CUDA ({got[0]['figure']}); spawning each one")
        return mp.get_context("spawn")
    return mpc


# Execution order: the slow or hang-prone checks last, so one of them cannot eat the others' budget.
ORDER = "a1 a2 a3 a4 a5 p1 c1 c2 d1 d2 d3 d4 g1 h0 n1 b1 b4 f1 b6".split()


def _environment(device: str, quick: bool, cpu_threads: int) -> str:
    parts = [
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        f"torch {torch.__version__}",
        f"python {platform.python_version()}",
        f"{os.cpu_count()} CPU cores",
        f"device {device}{' --quick' if quick else ''}",
        f"CPU figures with {cpu_threads} torch thread(s)",
    ]
    if device == "cuda":
        parts.insert(2, f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}")
        try:
            parts.insert(3, "NCCL " + ".".join(str(v) for v in torch.cuda.nccl.version()))
        except Exception:  # a torch without nccl: say nothing
            pass
    return ", ".join(parts)


def _table(rows: list[dict], env_line: str) -> str:
    lines = [
        f"GPU check ({env_line})",
        "",
        "| id | check | status | key figure | s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = (r["id"], r["name"], r["status"], r["figure"], r["seconds"])
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _failed_ids(path: str) -> list[str]:
    """Row ids from a failed-list file (one line, comma-separated) or from the FAIL rows of a gpu_check.md."""
    text = open(path).read()
    if text.lstrip().startswith("GPU check"):
        return [
            line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and "| FAIL |" in line
        ]
    return [t.strip() for t in text.replace("\n", ",").split(",") if t.strip()]


def _select(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    table = lib.SELF_TEST if args.self_test else lib.CHECKS
    row_to_check = {rid: cid for cid, spec in table.items() for rid in spec[3]}
    if args.rerun_failed is not None:
        path = args.rerun_failed or FAILED_FILE
        if not os.path.exists(path):
            print(
                f"gpu_check: nothing to rerun: {path} does not exist (a fresh machine?); pass --only IDS, the ids "
                "the first run's last line names"
            )
            raise SystemExit(2)
        args.only = ",".join(_failed_ids(path))
        if not args.only:
            print(f"gpu_check: nothing to rerun: no failed row in {path}")
            raise SystemExit(2)

    def ids(text: str | None) -> list[str]:
        if not text:
            return []
        wanted = [t.strip() for t in text.split(",") if t.strip()]
        unknown = [t for t in wanted if t not in row_to_check]
        if unknown:
            parser.error(f"unknown check id(s) {unknown}; valid: {', '.join(row_to_check)}")
        return [row_to_check[t] for t in wanted]

    only, skip = set(ids(args.only)), set(ids(args.skip))
    order = [c for c in ORDER if c in table] + [c for c in table if c not in ORDER]
    return [cid for cid in order if (not only or cid in only) and cid not in skip]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda (needs a GPU)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (with --device cpu: the CI form)")
    parser.add_argument("--only", help="comma-separated check ids, e.g. a1,b1,c1")
    parser.add_argument("--skip", help="comma-separated check ids to leave out")
    parser.add_argument(
        "--rerun-failed",
        nargs="?",
        const="",
        metavar="FILE",
        help=f"run the checks whose rows failed last time (default FILE: {FAILED_FILE}; or a gpu_check.md)",
    )
    parser.add_argument(
        "--budget", type=float, default=BUDGET_S, help=f"seconds for all checks, after a ~10 s start ({BUDGET_S:g})"
    )
    parser.add_argument(
        "--check-timeout", type=float, default=CHECK_TIMEOUT_S, help=f"seconds per check (default {CHECK_TIMEOUT_S:g})"
    )
    parser.add_argument("--cpu-threads", type=int, default=1, help="torch threads of the CPU figures in (d)")
    parser.add_argument("--out", help="table file (default: DIR/gpu_check.md with --out-dir, else a temporary file)")
    parser.add_argument(
        "--out-dir", metavar="DIR", help="folder for the table, the failed rows and one archive of the check logs"
    )
    parser.add_argument("--self-test", action="store_true", help=argparse.SUPPRESS)  # tests/test_gpu_check.py
    args = parser.parse_args(argv)

    cuda = torch.cuda.is_available()
    device = args.device or "cuda"
    if device == "cuda" and not cuda:
        print(
            f"gpu_check: no GPU: torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False); "
            "run with --device cpu for the checks that run on a CPU"
        )
        return 2
    if args.cpu_threads < 1:
        parser.error("--cpu-threads must be >= 1")
    checks = _select(args, parser)

    if args.out:
        out_path = os.path.abspath(args.out)
    elif args.out_dir:
        out_path = os.path.join(os.path.abspath(args.out_dir), "gpu_check.md")
    else:
        fd, out_path = tempfile.mkstemp(prefix="gpu_check_", suffix=".md")
        os.close(fd)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    out_dir = os.path.abspath(args.out_dir) if args.out_dir and not args.out else None
    tar_logs = out_dir is not None  # one archive: a few files to copy back
    log_dir = (
        tempfile.mkdtemp(prefix="gpu_check_logs_")
        if tar_logs
        else os.path.join(os.path.dirname(out_path), "gpu_check_logs")
    )
    os.makedirs(log_dir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="gpu_check_work_")
    ctx = lib.Ctx(
        device=device,
        quick=args.quick,
        workdir=workdir,
        cpu_threads=args.cpu_threads,
        nvml_check=os.environ.get(lib.NVML_CHECK_ENV),
    )
    env_line = _environment(device, args.quick, args.cpu_threads)
    print(f"gpu_check: {env_line}; {len(checks)} checks, budget {args.budget:g} s; logs in {log_dir}", flush=True)

    t0 = time.perf_counter()
    mpc = _start_forkserver(ctx, log_dir)
    print(f"gpu_check: fork server ready in {time.perf_counter() - t0:.1f} s", flush=True)
    start = time.perf_counter()
    rows: list[dict] = []
    try:
        for check_id in checks:
            left = args.budget - (time.perf_counter() - start)
            if left < 5:
                name, _, _, row_ids = {**lib.CHECKS, **lib.SELF_TEST}[check_id]
                for rid in row_ids:
                    why = f"not run: the {args.budget:g} s budget was used up"
                    rows.append({**lib.row(rid, name, why, "FAIL"), "seconds": "-"})
                continue
            log_path = os.path.join(log_dir, f"{check_id}.log")
            got, seconds = _run_one(mpc, check_id, ctx, log_path, min(args.check_timeout, left))
            for i, r in enumerate(got):
                rows.append({**r, "seconds": f"{seconds:.1f}" if i == 0 else f"(in {got[0]['id']})"})
                took = f" [{seconds:.1f} s]" if i == 0 else ""
                print(f"[{r['id']}] {r['status']:<8} {r['name']}: {r['figure']}{took}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total = time.perf_counter() - start
    rows.sort(key=lambda r: r["id"])
    table = _table(rows, env_line)
    failed = [r["id"] for r in rows if r["status"] == "FAIL"]
    verdict = f"{len(rows)} rows, {len(failed)} failed{' (' + ', '.join(failed) + ')' if failed else ''}, {total:.0f} s"
    table += f"\n{verdict}\n"
    with open(out_path, "w") as f:
        f.write(table)
    failed_text = ",".join(failed) + "\n"
    for path in [FAILED_FILE] + ([os.path.join(out_dir, "gpu_check_failed.txt")] if out_dir else []):
        with open(path, "w") as f:
            f.write(failed_text)
    if tar_logs:
        with tarfile.open(os.path.join(out_dir, "gpu_check_logs.tar.gz"), "w:gz") as tar:
            tar.add(log_dir, arcname="gpu_check_logs")
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir = os.path.join(out_dir, "gpu_check_logs.tar.gz")
    print("\n" + table, end="")
    print(f"gpu_check: table written to {out_path}; check logs in {log_dir}")
    if failed:
        again = RERUN.format(ids=",".join(failed)) + (f" --out-dir {args.out_dir}" if args.out_dir else "")
        print(f"gpu_check: rerun the failed rows: {again}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
