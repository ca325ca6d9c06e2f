#!/bin/sh
# Run as PID 1's child inside a node's own UTS namespace: name the node, then become the
# daemon. Arguments: HOSTNAME PROGRAM [ARGS...]; nothing here is parsed by a shell.
set -e
hostname "$1"
shift
exec "$@"
