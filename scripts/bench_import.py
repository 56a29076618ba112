#!/usr/bin/env python3
"""Import time of ``import pyacl_rt`` against ``import numpy``, measured in the same run.

    python scripts/bench_import.py [--repeat N] [--target R] [--json]

Each measurement is a fresh interpreter (``python -c``) that times only the import
statement (``time.perf_counter`` around it: interpreter start-up and ``site`` are not
counted, for either module). The two imports alternate, ``--repeat`` times each (default
31), after one warm-up of each; the medians are compared. Target (issue 9): pyacl_rt's
median <= ``--target`` (0.5) x numpy's. Exits 1 when the ratio misses the printed target,
2 when numpy is not installed.

Bytecode: both run with the same fresh ``PYTHONPYCACHEPREFIX`` (a temporary directory)
and ``PYTHONDONTWRITEBYTECODE`` unset, so after the warm-up both import from cached
bytecode, as an installed package does. (An editable install run with
``PYTHONDONTWRITEBYTECODE=1`` would otherwise recompile pyacl_rt's sources on every run
while numpy's wheel ships its bytecode.)

``--detail`` also prints pyacl_rt's heaviest imports (``python -X importtime``, cumulative
microseconds), for finding what to defer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

STMT = (
    "import time\n"
    "t0 = time.perf_counter()\n"
    "import {module}\n"
    "print(repr(time.perf_counter() - t0))\n"
)


def _env(cache_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYACL_RT_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache_dir
    return env


def time_import(module: str, env: dict[str, str]) -> float:
    """Seconds ``import module`` took in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", STMT.format(module=module)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"import {module} failed:\n{proc.stderr}")
    return float(proc.stdout.strip().splitlines()[-1])


def heaviest_imports(env: dict[str, str], top: int = 12) -> list[tuple[int, str]]:
    """``(cumulative us, module)`` of the heaviest imports below ``import pyacl_rt``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pyacl_rt"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    rows: list[tuple[int, str]] = []
    lines = proc.stderr.splitlines()
    # Children are printed before their parent: what `site` imported at start-up ends
    # with the `site` line; everything after it is the `-c` code, i.e. import pyacl_rt.
    start = next((i + 1 for i, ln in enumerate(lines) if ln.split("|")[-1].strip() == "site"), 0)
    for line in lines[start:]:
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        rows.append((int(parts[1]), parts[2].rstrip()))
    rows.sort(reverse=True)
    return rows[:top]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=31, help="imports of each module (odd)")
    ap.add_argument("--target", type=float, default=0.5, help="max pyacl_rt/numpy ratio")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    ap.add_argument("--detail", action="store_true", help="also list the heaviest imports")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")

    with tempfile.TemporaryDirectory(prefix="pyacl_bench_import_") as cache:
        env = _env(cache)
        try:
            for module in ("numpy", "pyacl_rt"):  # warm-up: compile and cache bytecode
                time_import(module, env)
        except RuntimeError as exc:
            if "numpy" in str(exc).split("\n", 1)[0]:
                print("bench_import: numpy is not installed (pip install numpy)", file=sys.stderr)
                return 2
            raise
        samples: dict[str, list[float]] = {"pyacl_rt": [], "numpy": []}
        for _ in range(args.repeat):
            for module in ("pyacl_rt", "numpy"):  # alternate: same machine load for both
                samples[module].append(time_import(module, env))
        detail = heaviest_imports(env) if args.detail else []

    med = {m: statistics.median(v) for m, v in samples.items()}
    ratio = med["pyacl_rt"] / med["numpy"]
    ok = ratio <= args.target
    if args.json:
        print(
            json.dumps(
                {
                    "median_s": med,
                    "min_s": {m: min(v) for m, v in samples.items()},
                    "repeat": args.repeat,
                    "ratio": ratio,
                    "target": args.target,
                    "pass": ok,
                    "heaviest_us": detail,
                },
                indent=2,
            )
        )
    else:
        print(f"import time, median of {args.repeat} fresh interpreters each (ms):")
        for m in ("pyacl_rt", "numpy"):
            v = samples[m]
            print(f"  import {m:<9} median {med[m] * 1e3:8.2f}   min {min(v) * 1e3:8.2f}")
        print(f"ratio pyacl_rt / numpy = {ratio:.3f}   target <= {args.target}   ", end="")
        print("PASS" if ok else "FAIL")
        if detail:
            print("heaviest imports under `import pyacl_rt` (cumulative us):")
            for us, name in detail:
                print(f"  {us:8d}  {name}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
