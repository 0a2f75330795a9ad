#!/usr/bin/env bash
# One GPU session's measurements, in phases that each fit a 10-minute command:
#   bash benchmarks/device_run.sh audit4|languages4|verify4|verify1|change-ab|memory2|inductor|check-inductor|tests-fast|tests|engine|engine-ab|roofline|studies|compare|aa|side|first|sample|baseline|speed|survey|ab|oom|probe|bisect|big|dask|flash
# Logs and artifacts go to $OUT (or ./artifacts). Optional wheels for the Jupyter stack in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-artifacts}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Wheels carried for an offline machine (.whl, .whl-lang, .whl-more): each one not installed yet goes into the
# interpreter's own site-packages (so .pth files work and nothing shadows what the machine has).
python3 - .whl .whl-lang .whl-more <<'PY'
import glob, importlib.metadata as md, subprocess, sys
wheels = [w for d in sys.argv[1:] for w in sorted(glob.glob(f"{d}/*.whl"))]
def missing(wheel):
    try:
        md.version(wheel.rsplit("/", 1)[-1].split("-")[0])
        return False
    except md.PackageNotFoundError:
        return True
todo = [w for w in wheels if missing(w)]
if todo:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--disable-pip-version-check", *todo], check=False)
    print(f"installed {len(todo)} of {len(wheels)} carried wheels", file=sys.stderr)
PY
# CuTe DSL's CUDA 13 library comes in two halves (.cutA, .cutB: an xz tar of its wheel's files), one per command,
# kept in /tmp between the commands of one machine and unpacked into site-packages once both are there.
for half in .cutA/cu13.part00 .cutB/cu13.part01; do [ -f "$half" ] && cp "$half" /tmp/; done
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -f /tmp/cu13.part00 ] && [ -f /tmp/cu13.part01 ] && [ ! -d "$site/nvidia_cutlass_dsl/cu13" ]; then
  cat /tmp/cu13.part00 /tmp/cu13.part01 | xz -d | tar -x -C "$site" && echo "CuTe DSL CUDA 13 library unpacked" >&2
fi
# `on G COMMAND`: COMMAND with GPU G alone and its share of the host's cores, its output in $OUT/gG.log.
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
q=$(( $(nproc) / (gpus > 0 ? gpus : 1) ))
on() { local g=$1; shift; CUDA_VISIBLE_DEVICES=$g taskset -c $((g * q))-$((g * q + q - 1)) bash -c "$*" > "$OUT/g$g.log" 2>&1; }
# `inductor_journal DEADLINE`: Inductor's compile of the KernelBench problems of INDUCTOR_IDS (in that order) judged as
# candidates over every visible GPU, resumed from INDUCTOR_JOURNAL and copied to $OUT.
inductor_journal() {
  KWB_JUDGES=${KWB_JUDGES:-4} timeout ${INDUCTOR_SECONDS:-540} python3 benchmarks/kernelbench_inductor.py --levels 1,2,3 \
    --ids "$INDUCTOR_IDS" --timeout 190 --deadline "$1" --out "$INDUCTOR_JOURNAL"
  cp "$INDUCTOR_JOURNAL" "$OUT/"
}
# `monitor`: every 10 s, the host's memory, load and process count and each GPU's memory and use, to $OUT/monitor.log.
monitor() {
  while true; do
    { date +%T; free -g | sed -n 2,3p; cut -d' ' -f1-3 /proc/loadavg; ps -e --no-headers | wc -l
      nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader; } | tr '\n' ' ' >> "$OUT/monitor.log"
    echo >> "$OUT/monitor.log"; sleep 10
  done
}
phase=${1:-tests}
case "$phase" in
  tests-fast)
    # The GPU tests without the slow ones (nvcc builds, the whole gallery): about 3 minutes on an H100.
    timeout 540 python3 -m pytest tests/gpu -m "gpu and not slow" -q -rfE -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests_fast.log" | tail -40
    ;;
  tests)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
    timeout 540 python3 -m pytest tests/gpu -m gpu -v -rA -p no:cacheprovider -s 2>&1 | tee "$OUT/gpu_tests.log" | tail -80
    ;;
  engine)
    timeout 560 python3 benchmarks/builtin_tasks.py --device cuda --json "$OUT/builtin_tasks.json" 2>&1 | tee "$OUT/builtin_tasks.log" | tail -40
    ;;
  roofline)
    timeout 250 python3 benchmarks/roofline_ceilings.py 2>&1 | tee "$OUT/roofline_ceilings.log" | tail -30
    timeout 300 python3 benchmarks/roofline_ncu.py 2>&1 | tee "$OUT/roofline_ncu.log" | tail -30
    ;;
  studies)
    python3 -m ipykernel install --sys-prefix --name python3 >/dev/null 2>&1 || true
    timeout 250 python3 -m workbench.cli.main study run studies/block_size_sweep.ipynb --device cuda --store "$OUT/study.db" \
      --out "$OUT/runs" --run-id gpu-sweep -p block_sizes '[256,512,1024,2048]' -p num_warps '[2,4,8,16]' --report 2>&1 | tail -15
    timeout 250 python3 -m workbench.cli.main study run studies/variant_shootout.ipynb --device cuda --store "$OUT/study.db" \
      --out "$OUT/runs" --run-id gpu-shootout --report 2>&1 | tail -15
    cp "$OUT"/runs/gpu-sweep/report.html "$OUT/block_size_sweep_report.html" 2>/dev/null
    cp "$OUT"/runs/gpu-shootout/report.html "$OUT/variant_shootout_report.html" 2>/dev/null
    python3 - "$OUT/study.db" <<'PY'
import sys, json, sqlite3
db = sqlite3.connect(sys.argv[1])
cols = [r[1] for r in db.execute("PRAGMA table_info(results)")]
for row in db.execute("SELECT run_id, candidate_name, status, size, time_median_ms, ref_median_ms, speedup, sol_fraction FROM results ORDER BY run_id, time_median_ms"):
    print(row)
PY
    ;;
  compare)
    # KernelBench's harness from a git-ignored copy of its src/ (.kernelbench-src), its problems in .kernelbench;
    # pydantic travels as wheels in .whl.
    timeout 560 python3 benchmarks/eval_vs_kernelbench.py --harness .kernelbench-src/src \
      ${KB_IDS:+--ids "$KB_IDS"} 2>&1 | tee "$OUT/eval_vs_kernelbench.log" | tail -30
    ;;
  aa)
    # KernelBench references against themselves, from problem KB_START of each level, for at most 500 s.
    timeout 580 python3 benchmarks/kernelbench_aa.py --levels "${KB_LEVELS:-1,2,3}" --start "${KB_START:-0}" \
      --deadline 500 --out "$OUT/aa.json" 2>&1 | tee "$OUT/aa.log" | tail -40
    ;;
  baseline)
    # The evaluation path's figures: overhead against the pre-sandbox engine (a checkout in .pre), then throughput.
    timeout 200 python3 benchmarks/eval_overhead.py --device cuda --reps 3 --before .pre 2>&1 | tee "$OUT/eval_overhead.log" | tail -25
    timeout 330 python3 benchmarks/eval_throughput.py 2>&1 | tee "$OUT/eval_throughput.log" | tail -12
    ;;
  speed)
    # Overlap on the GPU: candidates per minute with 1, 2 and 3 judges in one run, then the overhead figure.
    timeout 330 python3 benchmarks/eval_throughput.py --judges "${KB_JUDGES:-1,2,3}" 2>&1 | tee "$OUT/eval_throughput.log" | grep -v "^\[" | tail -30
    timeout 220 python3 benchmarks/eval_overhead.py --device cuda --reps 3 --before .pre 2>&1 | tee "$OUT/eval_overhead.log" | tail -25
    ;;
  survey)
    # Where a session starts: candidates per minute with this tree at KB_JUDGES (default 4,5), the overhead against
    # the pre-sandbox engine (.pre), then KB_TESTS (optional) GPU tests.
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
    timeout 260 python3 benchmarks/eval_throughput.py --judges "${KB_JUDGES:-4,5}" 2>&1 \
      | tee "$OUT/throughput.log" | grep -v "^\[" | tail -24
    timeout 200 python3 benchmarks/eval_overhead.py --device cuda --reps 3 --before .pre 2>&1 | tee "$OUT/eval_overhead.log" | tail -25
    [ -n "${KB_TESTS:-}" ] && timeout 100 python3 -m pytest $KB_TESTS -q -rfE -p no:cacheprovider 2>&1 | tail -8
    ;;
  engine-ab)
    # A restructuring of the engine, before and after in one run: candidates per minute with the engine in .base and
    # this tree (KB_JUDGES, default 4), then the built-in softmax's wall time against the pre-sandbox engine (.pre)
    # and the engine before the change (.base).
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
    timeout 330 python3 benchmarks/eval_throughput.py --before .base --judges "${KB_JUDGES:-4}" 2>&1 \
      | tee "$OUT/throughput.log" | grep -v "^\[" | tail -24
    timeout 240 python3 benchmarks/eval_overhead.py --device cuda --reps 3 --before .pre --before .base 2>&1 \
      | tee "$OUT/eval_overhead.log" | tail -12
    ;;
  ab)
    # A change to the evaluation path, before and after in one run: candidates per minute with the engine in .base
    # (`git archive <commit before> workbench | tar -x -C .base`), started from that folder so its judges import it,
    # then with this tree (2 and 3 judges), then the fast GPU subset.
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
    timeout 330 python3 benchmarks/eval_throughput.py --before .base --judges "${KB_JUDGES:-2,3}" 2>&1 \
      | tee "$OUT/throughput.log" | grep -v "^\[" | tail -24
    timeout 400 python3 -m pytest tests/gpu -m "gpu and not slow" -q -rfE -p no:cacheprovider 2>&1 \
      | tee "$OUT/gpu_tests_fast.log" | tail -15
    ;;
  side)
    # A/A with the reference timed in the judge's process against in its own runner, two judges taking turns.
    timeout 580 python3 benchmarks/aa_reference_side.py --reps "${KB_REPS:-2}" --deadline 420 \
      ${KB_IDS:+--ids "$KB_IDS"} ${KB_SIDES:+--sides "$KB_SIDES"} --out "$OUT/aa_side.json" 2>&1 | tee "$OUT/aa_side.log" | grep -v "^\[judge\|^\[runner" | tail -45
    ;;
  first)
    # First evaluations of new tasks, before (the engine in .base) and after in one run, this side only: the new GPU
    # tests, then KB_IDS (the first problem is the warm-up, measured as a repeat) with each engine.
    ids=${KB_IDS:-1/1,1/40,2/1,2/12,3/1}
    nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
    [ -n "${KB_TESTS:-}" ] && timeout 150 python3 -m pytest $KB_TESTS -q -rfE -p no:cacheprovider 2>&1 | tail -8
    # Each engine with empty Inductor and Triton caches of its own: neither finds the other's compiles.
    (cd .base && PYTHONPATH="$PWD" TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) timeout 230 \
      python3 ../benchmarks/eval_vs_kernelbench.py --problems ../.kernelbench/KernelBench --ids "$ids") 2>&1 \
      | tee "$OUT/first_before.log" | grep -v "^\[judge\|^\[runner" | tail -8
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) timeout 230 python3 \
      benchmarks/eval_vs_kernelbench.py --ids "$ids" 2>&1 | tee "$OUT/first_after.log" | grep -v "^\[judge\|^\[runner" | tail -8
    ;;
  sample)
    # The seeded 30-problem sample of issue-sized work (12 L1, 12 L2, 6 L3) at real sizes, one shard per command
    # (KB_SHARD=0/2 then 1/2 fit 10 minutes each); records in $OUT/sample.<shard>.json.
    shard=${KB_SHARD:-0/1}
    timeout 570 python3 benchmarks/kernelbench_aa.py --sample 1:12,2:12,3:6 --seed 0 --shard "$shard" \
      --timeout 150 --deadline "${KB_DEADLINE:-480}" --out "$OUT/sample.${shard/\//of}.json" 2>&1 \
      | tee "$OUT/sample.log" | grep -v "^\[judge\|^\[runner" | tail -45
    ;;
  oom)
    # Real-size problems that fill the GPU, one after another, with stacks of a problem that runs past 45 s and the
    # GPU's memory every 5 s.
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 5 > "$OUT/nvsmi.csv" 2>&1 &
    smi=$!
    timeout 560 python3 benchmarks/kernelbench_aa.py --levels 1 --sample "${KB_SAMPLE:-1:12}" --seed 0 \
      --timeout 60 --deadline 420 --stacks 45 --stacks-file "$OUT/stacks.txt" --out "$OUT/oom.json" 2>&1 | tee "$OUT/oom.log" | tail -30
    kill $smi
    ;;
  probe)
    # Where an A/A bias comes from (judge vs child process, own memory vs the shared slab), then the evaluation.
    timeout 240 python3 benchmarks/aa_bias_probe.py tests/kernelbench/level1/11_Sum_middle_dim_keepdim.py \
      tests/kernelbench/level1/12_Mean_last_dim.py tests/kernelbench/level1/14_Argmax_last_dim.py \
      tests/kernelbench/level2/6_Einops_HeadSplit_Softmax.py .kernelbench/KernelBench/level1/52_Argmin_over_a_dimension.py \
      2>&1 | tee "$OUT/aa_bias_probe.log" | grep -v "^\[" | tail -20
    ;;
  bisect)
    # The A/A bias of a large reduction, step by step: a real runner and no other stage, the same after the
    # correctness rounds, then the whole evaluation (KB_PROBLEM picks another problem).
    p=${KB_PROBLEM:-tests/kernelbench/level1/11_Sum_middle_dim_keepdim.py}
    for mode in bare checked; do
      timeout 200 python3 benchmarks/aa_bias_probe.py "$p" --runner $mode 2>&1 | grep -v "^\[" | tail -1
    done
    timeout 150 python3 benchmarks/aa_bias_probe.py "$p" --only-eval --no-compiled 2>&1 | grep -v "^\[" | tail -1
    ;;
  big)
    # The real-size problems whose inputs take 6-8 GiB, with the GPU's memory every 2 s.
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 2 > "$OUT/nvsmi_big.csv" 2>&1 &
    smi=$!
    timeout 400 python3 benchmarks/kernelbench_aa.py --levels 1 --ids "${KB_IDS:-1/19,1/34,1/39}" --timeout "${KB_TIMEOUT:-150}" \
      --out "$OUT/big.json" 2>&1 | tee "$OUT/big.log" | tail -12
    kill $smi
    python3 -c "import json,sys; [print(r['problem'], r['status'], r.get('seconds'), r.get('stages'), r.get('memory_gib'), r.get('check_phases')) for r in json.load(open(sys.argv[1]))['records']]" "$OUT/big.json"
    ;;
  dask)
    timeout 500 python3 benchmarks/study_throughput.py --out "$OUT" 2>&1 | tail -20
    ;;
  flash)
    # Tutorial 08's kernel against FlashAttention (autotuning included): about a minute on an H100.
    timeout 300 python3 -m pytest tests/test_flash_attention.py -q -rfE -p no:cacheprovider 2>&1 | tail -5
    timeout 500 python3 benchmarks/flash_attention.py --json "$OUT/flash_attention.json" 2>&1 | tee "$OUT/flash_attention.log" | tail -12
    ;;
  audit4)
    # Four workloads at once, one per GPU on its quarter of the cores: GPU 0 tutorial 08's kernel against
    # FlashAttention, then the cheat gallery and copy-out hooks on 16 CPU cores; GPU 1 the audit of a published
    # release (AUDIT_RELEASE, resumed from $AUDIT_OUT); GPU 2 eight KernelBench problems of 4-8 GiB, four in flight
    # against alone; GPU 3 Inductor's compile of KernelBench references judged as candidates (journal INDUCTOR_JOURNAL).
    on 0 "timeout 150 python3 benchmarks/flash_attention.py --json $OUT/flash_attention.json; CUDA_VISIBLE_DEVICES= TRITON_INTERPRET=1 timeout 330 python3 -m pytest tests/test_cheats.py tests/test_copy_out.py -q -n 8 -rfE -p no:cacheprovider | tail -15" &
    on 1 "timeout ${AUDIT_SECONDS:-520} python3 benchmarks/audit_published.py ${AUDIT_RELEASE:-.audit-src} --out ${AUDIT_OUT:-$OUT/audit} --problems .kernelbench/KernelBench -q" &
    on 2 "timeout 520 python3 benchmarks/scale.py --phase memory --ids ${BIG_IDS:-1/19,1/23,1/34,1/39,1/94,1/96,1/47,1/4} --repeat 1 --json $OUT/memory.json" &
    on 3 "KWB_JUDGES=4 timeout 530 python3 benchmarks/kernelbench_inductor.py --levels ${INDUCTOR_LEVELS:-2,3} --deadline 440 --out ${INDUCTOR_JOURNAL:-$OUT/inductor.json} | tail -30" &
    wait
    ;;
  languages4)
    # The languages table on GPU 0 (CuTe DSL and Helion need their wheels, above); GPUs 1-3 go on with the Inductor
    # journal, sharing it by level (INDUCTOR_JOURNAL, carried back from the last command).
    on 0 "timeout ${LANG_SECONDS:-300} python3 benchmarks/languages.py --kernelbench .kernelbench/KernelBench --json $OUT/languages.json" &
    for g in 1 2 3; do
      level=$(( g == 1 ? 1 : g == 2 ? 2 : 3 ))
      on $g "KWB_JUDGES=4 timeout ${LANG_SECONDS:-300} python3 benchmarks/kernelbench_inductor.py --levels $level --deadline $(( ${LANG_SECONDS:-300} - 70 )) --out ${INDUCTOR_DIR:-$OUT}/inductor_l$level.json | tail -20" &
    done
    wait
    ;;
  inductor)
    # The Inductor journal over every visible GPU (judges per GPU, each candidate on the least busy one), with the
    # host's and the GPUs' state every 10 s in $OUT/monitor.log and the whole log in $OUT/inductor.log.
    monitor & mon=$!
    inductor_journal "${INDUCTOR_DEADLINE:-390}" > "$OUT/inductor.log" 2>&1
    kill $mon
    grep -v '^\[judge\|^\[runner' "$OUT/inductor.log" | tail -60
    ;;
  check-inductor)
    # The fast GPU tests, then the Inductor journal for what is left of the command.
    timeout ${TESTS_SECONDS:-240} python3 -m pytest tests/gpu -m "gpu and not slow" -q -rfE -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests_fast.log" | tail -15
    monitor & mon=$!
    inductor_journal "${INDUCTOR_DEADLINE:-200}" > "$OUT/inductor.log" 2>&1
    kill $mon
    grep -v '^\[judge\|^\[runner' "$OUT/inductor.log" | tail -50
    ;;
  memory2)
    # Two workloads at once, one per GPU on its half of the cores: GPU 0 eight KernelBench problems of 4-8 GiB, four
    # in flight against each alone (memory admission); GPU 1 goes on with the Inductor journal (INDUCTOR_IDS,
    # INDUCTOR_JOURNAL, carried back from the last command).
    on 0 "timeout 540 python3 benchmarks/scale.py --phase memory --ids ${BIG_IDS:-1/19,1/23,1/34,1/39,1/94,1/96,1/47,1/4} --repeat 1 --json $OUT/memory.json" &
    ( taskset -cp $q-$((2 * q - 1)) $BASHPID > /dev/null; CUDA_VISIBLE_DEVICES=1 inductor_journal "${INDUCTOR_DEADLINE:-400}" \
      > "$OUT/g1.log" 2>&1 ) &
    wait
    for g in 0 1; do grep -v '^\[judge\|^\[runner' "$OUT/g$g.log" | tail -45; done
    ;;
  install)
    # Only the preamble: the carried wheels installed and a carried half of CuTe DSL's library kept for the next command.
    ;;
  change-ab)
    # One change to the engine, before (KB_BEFORE, a `git archive` of the commit before it) and after in one run: the
    # change's own tests on this machine's torch, the built-in softmax's wall time with the engines taking turns
    # (and the engine in .base), then candidates per minute with four judges.
    before=${KB_BEFORE:-.base}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
    [ -n "${KB_TESTS:-}" ] && timeout 60 python3 -m pytest $KB_TESTS -q -rfE -p no:cacheprovider 2>&1 | tail -4
    timeout 240 python3 benchmarks/eval_overhead.py --device cuda --reps 3 --alternate 2 --before "$before" \
      --before .base 2>&1 | tee "$OUT/eval_overhead.log" | tail -14
    timeout 280 python3 benchmarks/eval_throughput.py --before "$before" --judges 4 2>&1 \
      | tee "$OUT/throughput.log" | grep -v "^\[" | tail -16
    ;;
  verify1)
    # Before-and-after on one GPU, one workload at a time: throughput and overhead against .base (carried), the
    # KernelBench A/A sample, then the fast GPU subset for TESTS_SECONDS.
    timeout 200 python3 benchmarks/eval_throughput.py --judges 4 --count 8 --before .base 2>&1 | tail -12
    timeout 90 python3 benchmarks/eval_overhead.py --device cuda --reps 3 --before .base 2>&1 | tail -8
    timeout 170 python3 benchmarks/kernelbench_aa.py --sample 1:12,2:12,3:6 --seed 0 --timeout 150 --deadline 140 \
      --out "$OUT/aa_after.json" 2>&1 | grep -v '^\[judge\|^\[runner' | tail -8
    timeout ${TESTS_SECONDS:-100} python3 -m pytest tests/gpu tests/test_flash_attention.py -m 'gpu and not slow' -q -rfE \
      -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests_fast.log" | tail -8
    ;;
  verify4)
    # Before-and-after measurements on a host of four GPUs, one workload per GPU on its own quarter of the cores, at once:
    # GPU 0 throughput and overhead before/after (.base, .pre), GPU 1 the fast GPU subset, GPU 2 the KernelBench A/A
    # sample and the languages table, GPU 3 the same A/A sample with .base and Inductor on the problems named in
    # INDUCTOR_IDS with a longer timeout. One log per GPU in $OUT.
    on 0 "timeout 300 python3 benchmarks/eval_throughput.py --judges 4 --count 8 --before .base; timeout 180 python3 benchmarks/eval_overhead.py --device cuda --reps 3 --before .pre --before .base" &
    on 1 "timeout 480 python3 -m pytest tests/gpu tests/test_flash_attention.py -m 'gpu and not slow' -q -rfE -p no:cacheprovider" &
    on 2 "timeout 230 python3 benchmarks/kernelbench_aa.py --sample 1:12,2:12,3:6 --seed 0 --timeout 150 --deadline 200 --out $OUT/aa_after.json | grep -v '^\\[judge\\|^\\[runner' | tail -12; timeout 250 python3 benchmarks/languages.py --kernelbench .kernelbench/KernelBench --json $OUT/languages.json" &
    on 3 "PYTHONPATH=$PWD/.base:\${PYTHONPATH#*:} timeout 230 python3 benchmarks/kernelbench_aa.py --sample 1:12,2:12,3:6 --seed 0 --timeout 150 --deadline 200 --out $OUT/aa_before.json | tail -8; timeout 210 python3 benchmarks/kernelbench_inductor.py --ids ${INDUCTOR_IDS:-3/15} --levels 1,2,3 --timeout 190 --out $OUT/inductor_ids.json | tail -12; CUDA_VISIBLE_DEVICES= TRITON_INTERPRET=1 timeout 45 python3 -m pytest tests/test_cheats.py -k 'lower_triangular or symmetric' -q -p no:cacheprovider 2>&1 | grep -m6 -i 'error\\|status\\|assert'" &
    wait
    ;;
esac
