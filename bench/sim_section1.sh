#!/usr/bin/env bash
# Every grid that docs/BENCHMARKS.md section 1 ("Routing quality") cites, one after another, then
# the targets table over all of them. Resumable: each grid runs with --resume, so running this again
# after a stop (killed, out of time, a restart) goes on with the cells the same code has not finished
# and takes finished grids from their results. Every grid's traces are checked before the first cell
# runs: a recorded trace that is missing, or is not the file the stored results were made from, stops
# it there. Several hours on 2 cores (64- and 256-worker cells take 3-20 minutes each); progress per
# cell on stderr.
#
#   bash bench/sim_section1.sh [--jobs N] [--traces-dir DIR]
#
# The recorded traces are read from beside the shared synthetic trace (../shared/traces):
# conversation_trace.jsonl and mooncake_trace_excerpt.jsonl (bench/sim_policies.py says where each
# comes from).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=2
traces_dir=/tmp/kvgate-traces
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --traces-dir) traces_dir="$2"; shift 2 ;;
    *) echo "usage: bash bench/sim_section1.sh [--jobs N] [--traces-dir DIR]" >&2; exit 2 ;;
  esac
done
names=()
mode=check
grid() {
  local name="$1"; shift
  if [ "$mode" = check ]; then  # every grid's traces before the first cell runs
    python bench/sim_policies.py --check --traces-dir "$traces_dir" --name "$name" "$@"
    return
  fi
  echo "== $name" >&2
  python bench/sim_policies.py --resume --jobs "$jobs" --traces-dir "$traces_dir" --name "$name" "$@" >/dev/null
  names+=("$name")
}
five=synthetic,chat,agents,documents,pastes
variants=pastes_sparse,pastes_loyal,pastes_busy
grids() {
grid sim_policies_8w --traces $five --sizes 8x1 --capacities 1000000 --seeds 0,1,2
grid sim_policies_8w_seeds37 --traces $five --sizes 8x1 --capacities 1000000 --seeds 3,4,5,6,7
grid sim_policies_variants --traces $variants --sizes 8x1 --capacities 1000000 --seeds 0,1,2
grid sim_policies_300k --traces $five --sizes 8x1,64x8 --capacities 300000 --seeds 0
grid sim_policies_mooncake_conv --traces mooncake_conversation --sizes 8x1 --capacities 1000000,300000 --seeds 0,1,2
grid sim_policies_mooncake_arxiv --traces mooncake_arxiv_excerpt --sizes 8x1 --capacities 1000000,300000 --seeds 0,1,2
grid sim_policies_mooncake_arxiv_scale --traces mooncake_arxiv_excerpt --sizes 16x2,32x4 --capacities 1000000 --seeds 0,1,2
grid sim_policies_variants_64 --traces $variants --sizes 64x8 --capacities 1000000 --seeds 0
grid sim_policies_scale_s0 --traces $five --sizes 64x8,256x32 --capacities 1000000 --seeds 0
grid sim_policies_scale_synthetic_s12 --traces synthetic --sizes 64x8,256x32 --capacities 1000000 --seeds 1,2
grid sim_policies_scale_s12_64 --traces chat,agents,documents,pastes --sizes 64x8 --capacities 1000000 --seeds 1,2
grid sim_policies_scale_s12_256 --traces chat,agents,documents,pastes --sizes 256x32 --capacities 1000000 --seeds 1,2
grid sim_policies_mooncake_conv_scale --traces mooncake_conversation --sizes 64x8,256x32 --capacities 1000000 --seeds 0
grid sim_policies_mooncake_conv_64_seeds12 --traces mooncake_conversation --sizes 64x8 --capacities 1000000 --seeds 1,2
}
grids
mode=run
grids
python -m bench.sim_targets "${names[@]}"
