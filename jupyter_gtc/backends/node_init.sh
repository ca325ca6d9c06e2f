#!/bin/sh
# A node's first steps, run by tini inside the node's own namespaces, before it becomes the
# daemon:
#
#   node_init.sh [--hosts FILE] [--hostname NAME] -- PROGRAM [ARGS...]
#
# --hosts     bind-mounts FILE over /etc/hosts. unshare made this mount namespace private,
#             so the mount stays here (the machine's /etc/hosts is untouched) and every
#             process the daemon starts, job steps included, sees FILE.
# --hostname  names the node (unshare --uts gave it a UTS namespace of its own).
#
# Arguments are used as given; nothing here is parsed by a shell a second time.
set -eu
while [ "$#" -gt 0 ]; do
    case "$1" in
        --hosts) mount --bind "$2" /etc/hosts; shift 2 ;;
        --hostname) hostname "$2"; shift 2 ;;
        --) shift; break ;;
        *) echo "node_init.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
exec "$@"
