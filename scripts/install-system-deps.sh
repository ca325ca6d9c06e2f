#!/usr/bin/env bash
# Install the Debian packages jupyter_gtc's local backend, build and browser tests need, when missing.
# Idempotent: does nothing (and needs no network) when everything is already there.
set -euo pipefail

declare -A want=(
  [munged]=munge [slurmctld]=slurmctld [slurmd]=slurmd [sbatch]=slurm-client
  [tini]=tini [unshare]=util-linux [nsenter]=util-linux [ip]=iproute2 [npm]=npm
  [chromium]=chromium  # the browser tests drive it with Playwright (tests/browser/)
  [runuser]=util-linux [setfacl]=acl  # tests/non_root.py runs a normal user's cluster as gtc-test
)
missing=()
for program in "${!want[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing+=("${want[$program]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}" >&2
  echo "install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
