#!/bin/sh
# A node's first steps, run by tini inside the node's own namespaces, before it becomes the
# daemon, as a VM's boot runs before its slurmd:
#
#   node_init.sh [--hosts FILE] [--hostname NAME] [--mount FOLDER PATH]... [--as-user UID GID] \
#                [--startup SCRIPT LOG] [--status FILE] -- PROGRAM [ARGS...]
#
# --hosts     bind-mounts FILE over /etc/hosts. unshare made this mount namespace private,
#             so the mount stays here (the machine's /etc/hosts is untouched) and every
#             process the daemon starts, job steps included, sees FILE.
# --hostname  names the node (unshare --uts gave it a UTS namespace of its own).
# --mount     bind-mounts FOLDER at PATH, privately as well: the cluster's shared storage.
# --as-user   (a normal user's cluster, in a user namespace whose root is that user) goes on,
#             with the arguments after it, in a nested user namespace that maps this root
#             back to UID and GID: the startup script, the daemon and its jobs run as the user
#             who made the cluster, and know it. The mounts above stay (same mount namespace).
# --startup   runs SCRIPT (the pool's startup script) once the rest is done, from /, with its
#             output in LOG; if it fails, the node ends with its exit code.
# --status    where to write the outcome once everything above is done: the startup
#             script's exit code, or 0; the backend waits for it.
#
# Arguments are used as given; nothing here is parsed by a shell a second time.
set -eu
startup="" startup_log="" status=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --hosts) mount --bind "$2" /etc/hosts; shift 2 ;;
        --hostname) hostname "$2"; shift 2 ;;
        --mount) mount --bind "$2" "$3"; shift 3 ;;
        --as-user) uid=$2 gid=$3; shift 3
                   exec unshare --user "--map-user=$uid" "--map-group=$gid" -- sh "$0" "$@" ;;
        --startup) startup=$2 startup_log=$3; shift 3 ;;
        --status) status=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "node_init.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
rc=0
if [ -n "$startup" ]; then
    (cd / && exec "$startup") >"$startup_log" 2>&1 </dev/null || rc=$?
fi
if [ -n "$status" ]; then
    echo "$rc" >"$status.tmp"
    mv -f "$status.tmp" "$status"
fi
[ "$rc" -eq 0 ] || exit "$rc"
exec "$@"
