"""``gtc.jobs``, ``gtc.clusters`` and ``gtc.models`` (with ``import jupyter_gtc as gtc``): the api's functions
grouped by what they act on, for notebooks. Same functions, same behaviour."""

from types import SimpleNamespace

from . import api

jobs = SimpleNamespace(
    submit=api.submit_job, get=api.get_job, list=api.list_jobs, cancel=api.cancel_job, requeue=api.requeue_job,
)
clusters = SimpleNamespace(
    create=api.create_cluster, apply=api.apply_cluster_spec, get=api.get_cluster, list=api.list_clusters,
    scale=api.scale_cluster, delete=api.delete_cluster, env=api.cluster_env,
)
models = SimpleNamespace(
    register=api.register_model, get=api.get_model, list=api.list_models, set_alias=api.set_model_alias,
    delete=api.delete_model, deploy=api.deploy_model, undeploy=api.undeploy_model,
)
endpoints = SimpleNamespace(
    list=api.list_endpoints, get=api.get_endpoint, predict=api.predict, undeploy=api.undeploy_endpoint,
)
