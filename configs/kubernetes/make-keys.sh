#!/bin/sh
# make-keys.sh DIR REPLICAS: the keys of configs/kubernetes/satind.yaml, printed as the
# Secret satind-keys (pipe it to `kubectl apply -f -`). docs/deploy.md, "Keys".
#
# In DIR (made if need be, kept: it holds the CA's key): a CA, a node certificate for each
# pod name satind-0 ... satind-(REPLICAS-1), and the client certificate "probe" for the
# readiness probe. What exists already is kept, so running it again with more replicas only
# adds theirs. The Secret holds the CA certificate, the node and probe certificates and
# keys: never ca.key, which stays in DIR, off the cluster.
set -eu
if [ "$#" -ne 2 ]; then
    echo "usage: make-keys.sh DIR REPLICAS" >&2
    exit 2
fi
dir=$1
replicas=$2
if [ ! -f "$dir/ca.pem" ]; then
    satind keys init "$dir" >&2
fi
set -- --from-file="$dir/ca.pem"
i=0
while [ "$i" -lt "$replicas" ]; do
    if [ ! -f "$dir/satind-$i.pem" ]; then
        satind keys issue "$dir" "satind-$i" >&2
    fi
    set -- "$@" --from-file="$dir/satind-$i.pem" --from-file="$dir/satind-$i.key"
    i=$((i + 1))
done
if [ ! -f "$dir/probe.pem" ]; then
    satind keys issue "$dir" probe --client >&2
fi
set -- "$@" --from-file="$dir/probe.pem" --from-file="$dir/probe.key"
exec kubectl create secret generic satind-keys --dry-run=client -o yaml "$@"
