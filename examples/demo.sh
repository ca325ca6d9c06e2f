#!/usr/bin/env bash
# The main demo: a local 2-node Slurm cluster described by a Vertex AI training-cluster
# spec, and a 2-node GPU job on it. Run by `make demo`; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
gtc=.venv/bin/gtc
spec=examples/clusters/local-a3.yaml

if $gtc cluster describe demo >/dev/null 2>&1; then
  echo "== cluster demo exists already"
else
  echo "== gtc cluster create -f $spec"
  $gtc cluster create -f "$spec"
fi

echo
echo "== gtc cluster list"
$gtc cluster list

echo
echo "== gtc job submit examples/jobs/hello.sbatch --wait"
$gtc job submit examples/jobs/hello.sbatch --cluster demo --wait

echo
echo "== gtc job list"
$gtc job list --cluster demo

echo
echo "The cluster keeps running. Try:"
echo "  eval \"\$($gtc cluster env demo)\"; sinfo; squeue     # Slurm's own tools"
echo "  $gtc job logs hello"
echo "  $gtc cluster describe demo"
echo "  $gtc cluster scale demo --pool a3 --nodes 4"
echo "  $gtc cluster delete demo"
