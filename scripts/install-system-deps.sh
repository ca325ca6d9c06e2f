#!/usr/bin/env bash
# Install the Debian packages jupyter_gtc's local backend, build and browser tests need, when missing.
# Idempotent: does nothing (and needs no network) when everything is already there.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # where Debian puts daemons (munged, slurmd, sshd), off a normal user's PATH

declare -A want=(
  [munged]=munge [slurmctld]=slurmctld [slurmd]=slurmd [sbatch]=slurm-client
  [tini]=tini [unshare]=util-linux [nsenter]=util-linux [ip]=iproute2 [npm]=npm
  [chromium]=chromium  # the browser tests drive it with Playwright (tests/browser/)
  [runuser]=util-linux [setfacl]=acl  # tests/non_root.py runs a normal user's cluster as gtc-test
  [sshd]=openssh-server [ssh]=openssh-client  # tests/hosts: a login node over a real sshd (never started as a service)
  [slurmdbd]=slurmdbd [mariadbd]=mariadb-server [mariadb]=mariadb-client  # clusters that keep accounting (sacct)
  [slurmrestd]=slurmrestd  # the local Vertex endpoint's Slurm Job API (callSlurmRestApi), with the JWT plugin below
  # Containers (tests/containers): podman runs images (crun under it, and under Slurm's oci.conf); mmdebstrap
  # builds the tests' small Debian image from Debian's packages (no container registry is reachable in CI);
  # runc: crun 1.8 refuses hybrid cgroups (v1 + v2 mounted together), which CI machines have. umoci
  # unpacks an image into the OCI bundle `srun --container` runs; skopeo copies images between stores.
  [podman]=podman [crun]=crun [runc]=runc [mmdebstrap]=mmdebstrap [umoci]=umoci [skopeo]=skopeo [newuidmap]=uidmap
)
missing=()
for program in "${!want[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing+=("${want[$program]}")
done
# A plugin, not a program: slurmctld and slurmdbd load auth/jwt from Slurm's plugin folder.
compgen -G "/usr/lib/*/slurm-wlm/auth_jwt.so" >/dev/null || missing+=(slurm-wlm-jwt-plugin)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}" >&2
  echo "install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# munge, slurmctld, slurmd, slurmdbd, mariadb-server and openssh-server ship system services; jupyter_gtc starts its
# own daemons and never wants those. A policy-rc.d that refuses (exit 101) keeps the
# packages from starting them, for this install only, where the machine has none of its own.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
