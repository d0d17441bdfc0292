#!/usr/bin/env bash
# GPU tier + benchmarks on a CUDA machine (the lent H100/H200). Writes logs and JSON under $OUT (or ./gpu_out).
#   bash scripts/gpu_check.sh [tests] [tests_hopper] [tests_rest] [bench] [bench_mma] [sol] [sol_quick] [sol_sustained]
#   [sanitize] [sanitize_clusters] [sanitize_fuzz] [tune] [sanity] [w4a16] [compile_time]
#   (default: tests bench; `tests` runs every file, past one command's 10 minutes on the lent H100: there run
#   tests_hopper (~4 minutes with its compile step) and tests_rest (~2-3; without the offline compile sweeps, which CI
#   runs) as two calls)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export GN_MM_CACHE_DIR=${GN_MM_CACHE_DIR:-/tmp/gn_mm_cache}
steps=${*:-tests bench}
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, sys; print(torch.__version__, torch.version.cuda, sys.version)" | tee -a "$OUT/gpu.txt"

arch=$(python3 -c "import torch; m, n = torch.cuda.get_device_capability(); print(f'sm_{m}{n}')")
# Warm the disk cache for every variant x output x config in parallel: the tests then only load cubins.
time python3 -m gn_mm compile --arch "$arch" --all-configs --variants mma.sync,w4a16 --jobs 16 --json > "$OUT/compile_$arch.json" \
  || echo "compile step reported spills" | tee -a "$OUT/gpu.txt"

for step in $steps; do
  case $step in
    tests)
      python3 -m pytest tests -q -x -n 8 -p no:cacheprovider --junitxml="$OUT/gpu_tests.xml" 2>&1 \
        | tee "$OUT/gpu_tests.log" | tail -25 || status=1 ;;
    tests_hopper)  # the sm90_mm and W4A16 GPU files
      python3 -m pytest tests/test_sm90_gpu.py tests/test_w4a16_gpu.py -q -x -n 8 -p no:cacheprovider \
        --junitxml="$OUT/gpu_tests_hopper.xml" 2>&1 | tee "$OUT/gpu_tests_hopper.log" | tail -25 || status=1 ;;
    tests_rest)  # everything else but the offline compile sweeps (CPU work that CI runs; 8+ minutes here)
      python3 -m pytest tests -q -x -n 14 -p no:cacheprovider --ignore tests/test_sm90_gpu.py \
        --ignore tests/test_w4a16_gpu.py --ignore tests/test_compile_offline.py --junitxml="$OUT/gpu_tests_rest.xml" 2>&1 | tee "$OUT/gpu_tests_rest.log" \
        | tail -25 || status=1 ;;
    tune)
      python3 scripts/tune.py --out "$OUT/tune" 2>&1 | tail -80 || status=1 ;;
    bench)
      python3 scripts/bench.py --out "$OUT/bench" 2>&1 | tail -60 || status=1 ;;
    bench_mma)  # the mma.sync family where wgmma is the default (sm_90): issue 2's targets
      python3 scripts/bench.py --config mma.sync --shapes square --out "$OUT/bench_mma_sync" 2>&1 | tail -30 \
        || status=1 ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 1 python3 scripts/sanitize_cases.py $([ $tool = racecheck ] && echo --racecheck) 2>&1 \
          | tee "$OUT/sanitize_$tool.log" | tail -4 || status=1
      done ;;
    sanitize_clusters)  # racecheck + memcheck over every clustered sm90_mm config (about a minute on the H100)
      for tool in racecheck memcheck; do
        compute-sanitizer --tool $tool --error-exitcode 1 python3 scripts/sanitize_clusters.py 2>&1 \
          | tee "$OUT/sanitize_clusters_$tool.log" | tail -3 || status=1
      done ;;
    sanitize_fuzz)  # memcheck over the fuzz tier's random problems that are small enough (about 4 minutes)
      compute-sanitizer --tool memcheck --error-exitcode 1 python3 scripts/sanitize_fuzz.py 240 2>&1 \
        | tee "$OUT/sanitize_memcheck_fuzz.log" | tail -4 || status=1 ;;
    sol)
      python3 -m gn_mm sol --out "$OUT/sol" 2>&1 | tail -30 || status=1 ;;
    sol_sustained)  # the ceilings at the power limit beside the vendor and gn_mm (about a minute)
      python3 -m gn_mm sol --sustained --out "$OUT/sol_sustained" 2>&1 | tail -16 || status=1
      if python3 -c "import torch, sys; sys.exit(torch.cuda.get_device_capability() != (9, 0))"; then
        python3 -m gn_mm sol --sustained --family mma.sync --dtypes bf16,f16 --out "$OUT/sol_sustained_mma_sync" \
          2>&1 | tail -10 || status=1
      fi ;;
    sol_quick)
      time python3 -m gn_mm sol --quick --out "$OUT/sol_quick" 2>&1 | tail -30 || status=1 ;;
    w4a16)
      python3 -m pytest tests/test_w4a16_gpu.py -q -x -p no:cacheprovider 2>&1 | tee "$OUT/w4a16_tests.log" | tail -5 \
        || status=1
      python3 scripts/w4a16_bench.py --out "$OUT/w4a16" 2>&1 | tail -30 || status=1 ;;
    compile_time)  # issue 5's cold / warm first call of one Hopper variant (about 20 s)
      python3 scripts/compile_time.py --out "$OUT/compile_time.json" 2>&1 | grep median || status=1 ;;
    sanity)
      python3 scripts/mma_sass.py --out "$OUT/mma_sass" 2>&1 | tail -40 || status=1 ;;
  esac
done
exit $status
