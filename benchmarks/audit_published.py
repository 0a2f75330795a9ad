"""Audit a folder of published kernels on a GPU with `kwb audit` and print what the table says.

    python benchmarks/audit_published.py RELEASE --problems .kernelbench/KernelBench [--manifest claims.csv]
    python benchmarks/audit_published.py tests/data/audit/release --manifest tests/data/audit/manifest.csv \\
        --problems studies/data/audit/problems           # the kernels written for the tests, timed for real

RELEASE is a folder (or git checkout) of KernelBench-format kernels, or a JSON release; nothing of it is committed
here (fetch it beside the repository, e.g. under the git-ignored .kernelbench/). The audit runs through `kwb audit`
(so the command itself is what is measured), resumes in `--out` when rerun, and then this prints: the summary, the
verdicts by level, the claimed against measured ratio (median and quartiles, over kernels with both), and the
seconds the audit took. Other options go to `kwb audit` unchanged (e.g. `--field code=kernel_src`).

A large release can be audited on a sample: `--largest K` takes the K largest claims and `--sample N --seed S` N of
the other kernels at random; the chosen records are written to `OUT/sample.jsonl` (with their shipped references)
and that file is what is audited, e.g. for a JSON Lines release of one kernel per KernelBench problem:

    python benchmarks/audit_published.py ../CUDA-L1/optimized_cuda_code/h100.json --largest 4 --sample 20 --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release")
    parser.add_argument("--problems", action="append", default=[], help="KernelBench checkout (repeatable)")
    parser.add_argument("--manifest")
    parser.add_argument("--out", default="artifacts/audit")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="ieee")
    parser.add_argument("--largest", type=int, default=0, help="audit the K largest claims ...")
    parser.add_argument("--sample", type=int, default=0, help="... and N other kernels drawn at random")
    parser.add_argument("--seed", type=int, default=0)
    args, rest = parser.parse_known_args(argv)
    if args.largest or args.sample:
        args.release = str(_sample(Path(args.release), Path(args.out), args.largest, args.sample, args.seed))
    if not args.problems and (ROOT / ".kernelbench" / "KernelBench").is_dir():
        args.problems = [str(ROOT / ".kernelbench" / "KernelBench")]
    command = [sys.executable, "-m", "workbench.cli", "audit", args.release, "--out", args.out, "--device", args.device,
               "--precision", args.precision, "--resume"]
    command += [x for root in args.problems for x in ("--problems", root)]
    command += ["--manifest", args.manifest] if args.manifest else []
    command += [a for a in rest if a != "--"]
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    code = subprocess.call(command, cwd=ROOT)
    seconds = time.perf_counter() - started
    if code != 0:
        print(f"kwb audit exited {code} after {seconds:.0f} s", file=sys.stderr)
        return code
    _report(Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out, seconds)
    return 0


def _sample(release: Path, out: Path, largest: int, count: int, seed: int) -> Path:
    """The chosen kernels of `release` as one JSON Lines file in `out` (claims, problems, shipped references)."""
    sys.path.insert(0, str(ROOT))
    from workbench.audit.release import read_release

    entries = read_release(release)
    ranked = sorted((e for e in entries if e.claimed_speedup is not None), key=lambda e: -(e.claimed_speedup or 0))
    chosen = ranked[:largest]
    rest = [e for e in entries if e not in chosen]
    chosen += random.Random(seed).sample(rest, min(count, len(rest)))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "sample.jsonl"
    with path.open("w") as f:
        for e in chosen:
            f.write(json.dumps({"name": e.key, "code": e.code, "problem": e.problem, "level": e.level,
                                "problem_id": e.problem_id, "claimed_speedup": e.claimed_speedup,
                                "source": e.source or str(release.name), "precision": e.precision,
                                "reference": e.reference}) + "\n")
    print(f"{len(chosen)} of {len(entries)} kernels of {release} chosen (largest {largest}, sample {count}, "
          f"seed {seed}): {path}", flush=True)
    return path


def _report(out: Path, seconds: float) -> None:
    import pandas as pd

    frame = pd.read_csv(out / "audit.csv", keep_default_na=False, na_values=[""])
    print(f"\n== {len(frame)} kernels audited in {seconds:.0f} s ({seconds / max(len(frame), 1):.1f} s per kernel)")
    print(pd.crosstab(frame["level"].fillna(0).astype(int), frame["survives"], margins=True).to_string())
    reasons = frame.loc[frame["survives"] != "yes", "why"].map(lambda w: str(w).split(":")[0].split(" [")[0])
    print("\nwhy not:\n" + reasons.value_counts().to_string())
    both = frame.dropna(subset=["claimed_speedup", "speedup"])
    if len(both):
        ratio = both["speedup"] / both["claimed_speedup"]
        print(f"\nmeasured / claimed over {len(both)} kernels: median {ratio.median():.2f}, "
              f"quartiles {ratio.quantile(0.25):.2f}-{ratio.quantile(0.75):.2f}; "
              f"{(ratio < 1).mean():.0%} measured below their claim")
    flags = frame["flags"].dropna().str.split(",").explode().value_counts()
    if len(flags):
        print("\nflags:\n" + flags.to_string())
    print(f"\ntable {out / 'audit.csv'}, report {out / 'audit.html'} ({(out / 'audit.html').stat().st_size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
