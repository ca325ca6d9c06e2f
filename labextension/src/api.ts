/**
 * The server's REST API (`jupyter_gtc/server/`): one request helper, and one interface per
 * JSON answer, field by field, with the Python that writes it named on each.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** Where the server extension's routes live, below the server's base URL. */
export const API_PATH = 'gtc/api';

/** The full URL of an API path (`clusters`, `jobs/demo/12/log?offset=0`). */
export function apiUrl(path: string): string {
  return URLExt.join(ServerConnection.makeSettings().baseUrl, API_PATH, path);
}

/**
 * Call the API and return its JSON answer.
 *
 * @throws {ApiError} when the server answers with an error (its `{kind, message}`), or
 * `ServerConnection.NetworkError` when it cannot be reached.
 */
export async function requestAPI<T>(
  path: string,
  init: RequestInit = {}
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(apiUrl(path), init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: any = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { kind: 'HTTPError', message: text.slice(0, 200) };
  }
  if (!response.ok) {
    throw new ApiError(
      response.status,
      data?.kind ?? 'HTTPError',
      data?.message ?? response.statusText
    );
  }
  return data as T;
}

/** An error answer of the API. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    message: string
  ) {
    super(message);
  }
}

/** The body of every error answer (`server/base.py`, `GtcHandler.write_error`). */
export interface IErrorReply {
  /** The Python exception's class (`ClusterNotFound`, `SpecErrors`, ...) or `HTTPError`. */
  kind: string;
  /** What went wrong, for a person. */
  message: string;
}

/** A Slurm node (`NodeStatus` in `slurm/parse.py`, as `Cluster.to_json()` writes it). */
export interface INode {
  name: string;
  /** Base state: IDLE, MIXED, ALLOCATED, DOWN, UNKNOWN, ... */
  state: string;
  /** DRAIN, NOT_RESPONDING, ... */
  flags: string[];
  /** Why the node is drained or down, as the admin or health check gave it. */
  reason: string | null;
  partitions: string[];
  cpus: number;
  cpus_allocated: number;
  memory_mb: number;
  memory_allocated_mb: number;
  gpus: number;
  gpus_allocated: number;
  address: string;
  /** Up and able to take jobs. */
  ready: boolean;
}

/** A node pool of the spec (Vertex's `NodePool`, snake_case). */
export interface INodePool {
  id: string;
  machine_spec: {
    machine_type: string;
    accelerator_type?: string | null;
    accelerator_count?: number | null;
  };
  scaling_spec: { min_node_count: number; max_node_count: number };
  [field: string]: unknown;
}

/** A cluster spec (`ClusterSpec.to_json()`: Vertex's `ModelDevelopmentCluster`). */
export interface IClusterSpec {
  display_name: string;
  node_pools: INodePool[];
  orchestrator_spec: {
    slurm_spec: {
      partitions: { id: string; node_pool_ids: string[] }[];
      login_node_pool_id?: string | null;
      [field: string]: unknown;
    };
  };
  [field: string]: unknown;
}

/** A partition as jobs see it (`PartitionLayout` in `backends/base.py`). */
export interface IPartition {
  name: string;
  nodes: string[];
  /** GPUs of each node, in `nodes`' order. */
  node_gpus: number[];
  /** Each node's machine type; "" where not known (an attached cluster's own nodes). */
  node_types: string[];
  /** Where a job without --partition goes. */
  default: boolean;
}

/** A cluster (`Cluster.to_json()` in `services/clusters.py`). */
export interface ICluster {
  name: string;
  /** `local`, `slurm` or `vertex`. */
  backend: string;
  /** CREATING, RUNNING, SCALING, DELETING, ERROR. */
  state: string;
  /** Seconds since the epoch. */
  created_at: number;
  node_count: number;
  gpu_count: number;
  /** A cluster that exists without jupyter_gtc (backend `slurm`): never scaled or deleted, only detached. */
  attached: boolean;
  /** The spec it was created from; for an attached one, how it is reached (`AttachSpec`: ssh, python...). */
  spec: IClusterSpec;
  /** Its partitions, the default first. */
  partitions: IPartition[];
  /** The live parts, present while the cluster runs (RUNNING, SCALING, ERROR). */
  reachable?: boolean;
  problem?: string | null;
  details?: Record<string, string>;
  nodes?: INode[];
}

/**
 * A job (`Job.to_json()` in `services/jobs.py`, and `failure`): every job of the cluster, ours (`managed`)
 * and others' (a terminal's `sbatch`, another user's). `tests/server/test_wire_types.py`
 * fails when these fields and Python's differ.
 */
export interface IJob {
  cluster: string;
  /** Slurm's id (an array's id for an array). */
  id: string;
  name: string;
  /** PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ... */
  state: string;
  exit_code: number | null;
  /** Slurm's node list (`gpu-[0-1]`), empty before it starts. */
  nodes: string;
  /** Seconds it has run, as of the answer; null before it starts. */
  elapsed: number | null;
  /** The Slurm user it runs as (squeue's `user_name`); null for jobs recorded before it was kept. */
  user: string | null;
  /** Its folder (model, checkpoints, logs); null for a job that jupyter_gtc did not submit. */
  job_dir: string | null;
  /** An array's tasks by task id. */
  tasks: Record<string, { state: string; exit_code: number | null }>;
  /** Seconds since the epoch. */
  submitted_at: number;
  /** Why it waits (Resources, Priority, JobHeldUser, ...), when Slurm says. */
  reason: string | null;
  /** Submitted through jupyter_gtc; false for a job others submitted (it has no metrics). */
  managed: boolean;
  /** In a state after which it does nothing more (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...). */
  finished: boolean;
  /** Its batch script's output; null where Slurm does not say (a job of others' that had ended). */
  log_path: string | null;
  /** How many times it has started: 1, and one more for each requeue (its log keeps each). */
  attempts: number;
  /** Why it failed, one line: its state, exit code and its log's first error line
   * (`FAILED (exit code 1): ModuleNotFoundError: No module named 'foo'`); null unless it failed,
   * and until the server has read its log (`job_json` in `server/handlers_jobs.py`). */
  failure: string | null;
}

/** A trial of a study (`TrialView.to_json()` in `services/tuning/trials.py`). */
export interface ITrial {
  /** Optuna's trial number, from 0. */
  number: number;
  /** `CLOUD_ML_TRIAL_ID`: "1", "2", ... as on Vertex; what `stop_trial` takes. */
  trial_id: string;
  /** RUNNING, COMPLETE, PRUNED or FAIL (Optuna's). */
  state: string;
  /** The hyperparameters it got; conditional ones only where active. */
  params: Record<string, string | number | boolean>;
  /** The final metric (COMPLETE; PRUNED: its last report); null where NaN or not yet. */
  value: number | null;
  /** The newest intermediate value, and its step. */
  latest: number | null;
  step: number | null;
  job_id: string | null;
  job_dir: string | null;
  /** Why it stopped early or failed. */
  reason: string | null;
  /** Seconds since the epoch. */
  started: number | null;
  finished: number | null;
  stopped_early: boolean;
  /** Every intermediate [step, value]: only in `GET studies/<name>`. */
  curve?: [number, number | null][];
}

/** A tuning study (`handlers_studies.study_json`: `Study.to_json()` less the spec and curves). */
export interface IStudy {
  name: string;
  cluster: string;
  /** RUNNING, STOPPING, SUCCEEDED, FAILED or STOPPED. */
  state: string;
  reason: string | null;
  /** Which Optuna sampler drives it, and why. */
  sampler: string;
  metric: string;
  direction: 'minimize' | 'maximize';
  max_trials: number;
  parallel: number;
  /** Some live process (a kernel, the CLI, this server) drives it; else it waits to be resumed. */
  driven: boolean;
  /** Trials by state: RUNNING, COMPLETE, PRUNED, FAIL. */
  counts: Record<string, number>;
  /** The best completed trial so far. */
  best: ITrial | null;
  trials: ITrial[];
}

/** A range of a job's log (`handlers_jobs.read_log_range`). */
export interface ILogChunk {
  text: string;
  /** The byte offset `text` starts at: 0 when the log started over (a requeue). */
  offset: number;
  /** Where the next read starts. */
  next_offset: number;
  /** The file's size at this read. */
  size: number;
  /** The job had finished before this read, so the log is complete once read to `size`. */
  finished: boolean;
}

/** One scalar a job reported (`metrics.Scalar`, as `handlers_jobs.scalar_json` writes it). */
export interface IScalar {
  tag: string;
  step: number;
  /** Seconds since the epoch, when the job wrote it. */
  wall_time: number;
  /** null where the job wrote NaN or an infinity (JSON has no such numbers). */
  value: number | null;
  /** The event file's folder below the job's log dir; "" for the top, "hypertune" for its reports. */
  run: string;
}

/** New scalars of a job (`JobMetricsHandler`): ask again with `since=next`. */
export interface IMetricsChunk {
  scalars: IScalar[];
  next: number;
  /** The job had finished before this read: once read to the end, nothing more comes. */
  finished: boolean;
}

/**
 * A create, scale or delete running in the background (`Operation.to_json()` in
 * `services/operations.py`): the answer of `POST clusters`, `POST clusters/<name>/scale`
 * and `DELETE clusters/<name>` (202), of `GET operations/<id>`, and the feed's `operation` event.
 */
export interface IOperation {
  /** Unique in the server's process. */
  id: string;
  action: 'create' | 'scale' | 'delete';
  cluster: string;
  /** RUNNING, then DONE or FAILED. */
  state: 'RUNNING' | 'DONE' | 'FAILED';
  /** The latest progress message ("starting slurmd 2/3"); empty before the first. */
  message: string;
  /** Seconds since the epoch. */
  started_at: number;
  finished_at: number | null;
  /** Why it failed, when it did. */
  error: IErrorReply | null;
  /** The cluster as it ended (create, scale); null while running, after a delete or a failure. */
  result: ICluster | null;
}

/**
 * Something that happened to a node of a cluster: the remediation history the sidebar shows
 * under a cluster. For a local cluster, a row of `cluster_events`, written by the supervisor
 * (`backends/supervisor.py`; the event names are `health/ladder.py`'s); for a Vertex AI
 * training cluster, one of Vertex's `clusterEvents`, kept across polls
 * (`vertex_clusters/events.py`).
 */
export interface IClusterEvent {
  /** Seconds since the epoch; `GET clusters/<name>/events?since=<time>` answers only newer ones. */
  time: number;
  /** The node it concerns (`gpu-1`; on Vertex, its `instanceName`). */
  node: string;
  /** The supervisor's: detected, down, unreachable, restarted, reimaged, replaced, still failing,
   * healthy, gave up, back, left alone, released, hang, ...; Vertex's `eventType` as it names it:
   * VM_SLURM_DRAIN, VM_REPORT_AND_REPLACEMENT, ... (the local Vertex endpoint's others are the
   * supervisor's, as GTC_DOWN, GTC_STILL_FAILING, ...). */
  event: string;
  /** Why, or what was done, for a person ("its slurmd exited", "job 12 wrote nothing ..."; on
   * Vertex, its `description`: the drain's or the report's reason); may be "". */
  detail: string;
}

/** `GET clusters/<name>/events`: oldest first. */
export interface IClusterEventList {
  events: IClusterEvent[];
}

/** `GET operations`: running and recently finished, oldest first. */
export interface IOperationList {
  operations: IOperation[];
}

/** `GET clusters`. */
export interface IClusterList {
  clusters: ICluster[];
}

/** `GET jobs?cluster=`. */
export interface IJobList {
  jobs: IJob[];
}

/** The change feed's events (`server/feed.py`). */
export namespace FeedEvent {
  /** First on every connection: everything, to start over from. */
  export interface ISnapshot {
    clusters: ICluster[];
    cluster: string | null;
    jobs: IJob[];
    /** The cluster's tuning studies, newest first. */
    studies: IStudy[];
    /** Running and recently finished operations, oldest first. */
    operations: IOperation[];
  }
  /** A create, scale or delete started, made progress or ended. */
  export type IOperationEvent = IOperation;
  /** A cluster or node changed. */
  export type IClusters = IClusterList;
  /** One of the cluster's studies changed: all of them, newest first. */
  export interface IStudies {
    cluster: string;
    studies: IStudy[];
  }
  /** A tick failed; the next one retries. */
  export interface IWarning {
    message: string;
  }
}

/** A version in `GET models` (`handlers_models.models_json`): no lineage, for a short list. */
export interface IModelVersionSummary {
  /** From 1. */
  version: number;
  /** `default` on exactly one version; each alias on one version at most. */
  aliases: string[];
  /** Seconds since the epoch. */
  created_at: number;
  /** Its folder, or a gs:// URI. */
  artifact_uri: string;
  /** The id of the job that trained it; null for a folder registered without one. */
  job: string | null;
  /** Served by an endpoint now. */
  deployed: boolean;
}

/** A model in `GET models`. */
export interface IModelSummary {
  name: string;
  description: string;
  labels: Record<string, string>;
  created_at: number;
  /** Oldest first. */
  versions: IModelVersionSummary[];
}

/** `GET models`: by name. */
export interface IModelList {
  models: IModelSummary[];
}

/** What trained a version (`services/model_lineage.job_lineage`, and `parent`, `origin`,
 * `source` from `ModelService.register`); a registration without a job has only the last three. */
export interface ILineage {
  job?: {
    cluster: string;
    id: string;
    name: string;
    state: string;
    exit_code: number | null;
    job_dir: string;
    user: string | null;
    submitted_at: number;
    ended_at: number | null;
  };
  script?: { path: string; text: string | null; cut_at?: number };
  /** sbatch's options it ran with. */
  options?: string[];
  /** The study trial that ran it. */
  trial?: {
    study: string;
    trial_id: string;
    number: number;
    params: Record<string, string | number | boolean>;
    value: number | null;
    state: string;
  } | null;
  /** Each tag's last scalar; a NaN value is null. */
  metrics?: Record<string, { step: number; value: number | null; wall_time: number }>;
  /** Its job's newest complete checkpoint. */
  checkpoint?: string | null;
  /** The version it was initialised from (`name@3`). */
  parent: string | null;
  /** What else made it (a recipe's name and config). */
  origin: Record<string, unknown> | null;
  /** The folder or URI it was registered from. */
  source: string;
}

/** A version in `GET models/REF` (`services/models.version_json`). */
export interface IModelVersion {
  version: number;
  aliases: string[];
  description: string;
  labels: Record<string, string>;
  artifact_uri: string;
  /** Copied into `$GTC_HOME/models/` (else referenced where it was). */
  copied: boolean;
  lineage: ILineage;
  /** Its endpoint while deployed (`services/endpoints.py`'s row); null otherwise. */
  deployment: { endpoint: string; cluster: string; [field: string]: unknown } | null;
  created_at: number;
  created_by: string;
}

/** `GET models/REF` (`Model.to_json()` in `services/models.py`): the model with every
 * version's lineage and its history. */
export interface IModel {
  name: string;
  /** The version REF named. */
  version: number;
  description: string;
  labels: Record<string, string>;
  created_at: number;
  created_by: string;
  versions: IModelVersion[];
  /** Every register, alias move, deploy and undeploy, oldest first. */
  events: { time: number; user: string; event: string; model: string; version: number | null; detail: Record<string, unknown> }[];
}

/** A replica of an endpoint (`Front.snapshot()` in `serving/front.py` where this server serves
 * the endpoint; else as recorded: job, host, port). */
export interface IReplica {
  /** Its Slurm job's id. */
  job: string;
  address?: string;
  /** Its health route answered 200 at the last check. */
  healthy?: boolean;
  /** Requests it holds now. */
  outstanding?: number;
  /** Requests it has answered. */
  served?: number;
  last_error?: string | null;
  host?: string;
  port?: number;
}

/** An endpoint's last minute (`serving/traffic.summarize`). */
export interface ITraffic {
  /** Seconds the figures cover at most (60). */
  window: number;
  requests: number;
  /** Requests per second. */
  rate: number;
  /** Latency of the answered requests, seconds; null with none. */
  p50: number | null;
  p95: number | null;
  /** Requests answered with an error (400, 429, 5xx). */
  errors: number;
}

/** A deployed endpoint (`handlers_endpoints.endpoint_json`: `Endpoint.to_json()` and `traffic`). */
export interface IEndpoint {
  id: string;
  /** `name@version`. */
  model: string;
  cluster: string;
  /** Its front's predict address (loopback: for this machine's processes of the user). */
  url: string;
  min_replicas: number;
  max_replicas: number;
  replicas: IReplica[];
  deployed_at: number;
  deployed_by: string;
  /** The process whose front serves it. */
  served_by_pid: number;
  traffic: ITraffic;
}

/** `GET endpoints`. */
export interface IEndpointList {
  endpoints: IEndpoint[];
}
