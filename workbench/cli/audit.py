"""`kwb audit RELEASE`: re-score published kernels (workbench.audit) and print which claims survive.

Exit 0 when the audit ran (whatever its verdicts: a rejected claim is the audit's finding, not a failure of the
command), 2 for a release, manifest or option that cannot be used (nothing runs), 3 when the workbench failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli.common import EXIT_OK, UsageError, device_arg, positive
from workbench.cli.format import format_table


def _precision_names() -> list[str]:
    from workbench.tasks.precision import precisions

    return precisions()


def _number(value: float | None, suffix: str = "x") -> str:
    return "-" if value is None or value != value else f"{value:.2f}{suffix}"


def print_table(frame, stream=None) -> None:
    """The audit's table, one line per kernel, for a terminal."""
    rows = [(r["kernel"], r["problem"], _number(r["claimed_speedup"]), r["claim_precision"],
             r["status"] + (f" [{r['flags']}]" if r["flags"] else ""), _number(r["speedup"]),
             r["survives"], r["why"]) for r in frame.to_dict("records")]
    print(format_table(rows, ["kernel", "problem", "claimed", "precision", "status", "speedup", "survives", "why"],
                       max_width=90), file=stream or sys.stdout)


def cmd_audit(args: argparse.Namespace) -> int:
    from workbench.audit import ReleaseFields, run_audit
    from workbench.eval.options import EvalOptions

    if not Path(args.release).exists():
        raise UsageError(f"{args.release} does not exist; give the folder (or git checkout, .py or JSON release) "
                         "that holds the kernels")
    for root in args.problems:
        if not Path(root).is_dir():
            raise UsageError(f"--problems {root} is not a folder; give a KernelBench checkout or a folder of "
                             "problem files")
    options = EvalOptions(rounds=args.rounds, timeout=args.timeout, compile_timeout=args.compile_timeout)
    audit = run_audit(args.release, manifest=args.manifest, problems=args.problems, out=args.out, device=args.device,
                      precision=args.precision, resume=args.resume, fields=ReleaseFields.parse(args.field),
                      options=options, progress=not args.quiet)
    print_table(audit.frame)
    print()
    print(audit.summary())
    done = f"{audit.evaluated} evaluations run" + (f", {audit.reused} taken from the earlier run" if audit.reused
                                                  else "")
    print(f"\n{done}\ntable: {audit.csv}\nreport: {audit.html}\njournal: {audit.out_dir / 'audit.db'} "
          f"(rerun with --resume to continue it)")
    return EXIT_OK


def add_audit_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="re-score published kernels: which speedup claims survive, and why",
                       description="Evaluate every kernel of a release (a folder or git checkout of KernelBench-"
                                   "format kernels, a JSON release, a .py) under the precision its claim was "
                                   "measured under and under IEEE, and print which claims survive. docs/audit.md.")
    p.add_argument("release", help="folder, git checkout, .py or JSON file holding the kernels")
    p.add_argument("--manifest", help="CSV or JSON: file, problem or level/problem_id, claimed_speedup, source, "
                                      "precision per kernel (only its rows are audited)")
    p.add_argument("--problems", action="append", default=[], metavar="FOLDER",
                   help="KernelBench checkout or folder of problem files (repeatable; the release is searched too)")
    p.add_argument("--out", default="audit", help="output folder: audit.csv, audit.html and the journal audit.db")
    p.add_argument("--device", type=device_arg, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--precision", choices=_precision_names(), default="ieee",
                   help="precision a claim was measured under when its row does not say (default ieee)")
    p.add_argument("--resume", action="store_true", help="continue the audit in --out: finished evaluations are "
                                                         "not run again")
    p.add_argument("--field", action="append", default=[], metavar="FIELD=NAME",
                   help="field names of a JSON release's records, e.g. --field code=kernel_src --field "
                        "claimed_speedup=speedup_reported (repeatable)")
    p.add_argument("--rounds", type=positive(int), default=5, help="correctness rounds per evaluation")
    p.add_argument("--timeout", type=positive(float), help="seconds a kernel may take for any one step")
    p.add_argument("--compile-timeout", type=positive(float), help="seconds to load a kernel (CUDA builds included)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_audit)
