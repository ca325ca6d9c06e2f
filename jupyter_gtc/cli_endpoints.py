"""``gtc endpoint ...`` and ``gtc model deploy|undeploy``: serving's verbs (``cli.py`` and
``cli_models.py`` add them). Each calls the ``api`` function of the same action and prints.

    gtc endpoint list [--json]                          every deployed endpoint
    gtc endpoint show ENDPOINT [--json]                 one: its model, address, replicas
    gtc endpoint predict ENDPOINT --json '{"instances": [...]}'
    gtc model deploy NAME@ALIAS --cluster C [--min-replicas N] [--max-replicas N] [--command ARG...]
    gtc model undeploy NAME@ALIAS

An endpoint's address is served by the process that deployed it, so ``gtc model deploy`` serves
until Ctrl-C (then undeploys), as ``gtc vertex serve`` does; deployed from a notebook, it lives
as long as the kernel.
"""

from __future__ import annotations

import argparse
import json
import time

from . import api
from .exceptions import EndpointNotFound, SpecError


def add_endpoint_verbs(verbs) -> None:
    endpoint = verbs.add_parser("endpoint", help="deployed models: list, show, predict")
    ev = endpoint.add_subparsers(title="endpoint commands", metavar="VERB")
    lst = ev.add_parser("list", help="every deployed endpoint: id, model, cluster, replicas, address")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_list)
    show = ev.add_parser("show", help="one endpoint: its model, address and replicas")
    show.add_argument("endpoint")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)
    predict = ev.add_parser("predict", help="send a prediction request, print the predictions as JSON")
    predict.add_argument("endpoint")
    predict.add_argument("--json", dest="body", required=True, metavar="BODY",
                         help='the request: \'{"instances": [{"prompt": "Hello", "max_tokens": 8}]}\'')
    predict.set_defaults(func=_predict)


def add_deploy_verbs(model_verbs) -> None:
    deploy = model_verbs.add_parser("deploy", help="serve a version as an endpoint (Slurm jobs of a cluster) "
                                                   "until Ctrl-C")
    deploy.add_argument("ref", metavar="NAME[@ALIAS|@VERSION]")
    deploy.add_argument("--cluster", required=True)
    deploy.add_argument("--min-replicas", type=int, default=1)
    deploy.add_argument("--max-replicas", type=int)
    deploy.add_argument("--command", nargs=argparse.REMAINDER, metavar="ARG",
                        help="your own server under Vertex's serving contract, instead of ours: the rest of "
                             "the line (--command python serve.py)")
    deploy.set_defaults(func=_deploy)
    undeploy = model_verbs.add_parser("undeploy", help="end a version's endpoint and its replicas' jobs")
    undeploy.add_argument("ref", metavar="NAME[@ALIAS|@VERSION]")
    undeploy.set_defaults(func=_undeploy)


def _list(args) -> int:
    endpoints = [e.to_json() for e in api.list_endpoints()]
    if args.json:
        print(json.dumps(endpoints, indent=2))
        return 0
    if not endpoints:
        print("no endpoints are deployed (gtc model deploy NAME@ALIAS --cluster C)")
    for e in endpoints:
        print(f"{e['id']}  {e['model']}  {e['cluster']}  replicas={len(e['replicas'])}  {e['url']}")
    return 0


def _show(args) -> int:
    data = api.get_endpoint(args.endpoint).to_json()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"endpoint {data['id']}: {data['model']} on {data['cluster']}, served by pid {data['served_by_pid']}")
    print(f"  url       {data['url']}")
    for r in data["replicas"]:
        print(f"  replica   job {r['job']} at {r['address'] if 'address' in r else r['host'] + ':' + str(r['port'])}")
    return 0


def _predict(args) -> int:
    try:
        body = json.loads(args.body)
    except ValueError as e:
        raise SpecError("--json", args.body[:60], f"is not JSON ({e}); give '{{\"instances\": [...]}}'") from None
    if not isinstance(body, dict) or not isinstance(body.get("instances"), list):
        raise SpecError("--json", args.body[:60], "give an object with a list of instances: '{\"instances\": [...]}'")
    print(json.dumps({"predictions": api.predict(args.endpoint, body["instances"])}, indent=2))
    return 0


def _deploy(args) -> int:
    endpoint = api.deploy_model(args.ref, args.cluster, min_replicas=args.min_replicas,
                                max_replicas=args.max_replicas, command=args.command or None)
    print(f"endpoint {endpoint.id}: {endpoint.model} at {endpoint.url}; serving until Ctrl-C", flush=True)
    try:
        while not _gone(endpoint.id):  # undeployed from elsewhere (`gtc model undeploy`): nothing left to serve
            time.sleep(1)
        print(f"endpoint {endpoint.id} was undeployed")
        return 0
    except KeyboardInterrupt:
        pass
    api.undeploy_endpoint(endpoint.id)
    print(f"endpoint {endpoint.id} undeployed")
    return 0


def _gone(endpoint: str) -> bool:
    try:
        api.get_endpoint(endpoint)
        return False
    except EndpointNotFound:
        return True


def _undeploy(args) -> int:
    api.undeploy_model(args.ref)
    print(f"{args.ref} undeployed")
    return 0
