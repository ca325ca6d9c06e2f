/**
 * What the sidebar shows, kept current by the change feed: the clusters, the chosen
 * cluster, and its jobs. Sections render from it and call its actions; none of them talks
 * to the server on its own.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { FeedEvent, ICluster, IJob, requestAPI } from './api';
import { EventFeed, FeedStatus, IFeedMessage } from './feed';

/** Actions on a job, each a `POST jobs/<cluster>/<id>/<action>`. */
export type JobAction = 'cancel' | 'requeue' | 'hold' | 'release';

/** Slurm states after which a job does nothing more. */
export const FINISHED_STATES = new Set([
  'COMPLETED',
  'FAILED',
  'CANCELLED',
  'TIMEOUT',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE'
]);

export class ClustersModel implements IDisposable {
  /** Every cluster, oldest first, with its nodes. */
  clusters: ICluster[] = [];
  /** The chosen cluster, whose jobs `jobs` holds. */
  cluster: string | null = null;
  /** A failed tick of the feed, until the next one succeeds. */
  warning: string | null = null;
  /** Whether the first snapshot has arrived. */
  loaded = false;

  constructor() {
    this._connect();
  }

  /** Emitted (at most once per animation frame) whenever anything above changed. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get status(): FeedStatus {
    return this._feed?.status ?? 'connecting';
  }

  /** The chosen cluster's jobs, newest first. */
  get jobs(): IJob[] {
    if (this._sortedJobs === null) {
      this._sortedJobs = [...this._jobs.values()].sort(
        (a, b) => b.submitted_at - a.submitted_at || Number(b.id) - Number(a.id)
      );
    }
    return this._sortedJobs;
  }

  get currentCluster(): ICluster | null {
    return this.clusters.find(c => c.name === this.cluster) ?? null;
  }

  /** Seconds `job` has run by now (counting on while it runs), or null. */
  elapsed(job: IJob): number | null {
    if (job.elapsed === null || job.elapsed < 0 || job.state === 'PENDING') {
      return null;
    }
    if (job.state !== 'RUNNING') {
      return job.elapsed;
    }
    const since = this._receivedAt.get(job.id) ?? Date.now();
    return job.elapsed + (Date.now() - since) / 1000;
  }

  /** Show `name`'s jobs. */
  selectCluster(name: string | null): void {
    if (name !== this.cluster) {
      this.cluster = name;
      this._jobs.clear();
      this._sortedJobs = null;
      this._connect();
    }
  }

  /** Start over from a fresh snapshot. */
  refresh(): void {
    this._connect();
  }

  async act(job: { cluster: string; id: string }, action: JobAction): Promise<void> {
    const path = `jobs/${enc(job.cluster)}/${enc(job.id)}/${action}`;
    this._upsert(await requestAPI<IJob>(path, { method: 'POST' }));
  }

  async scale(cluster: string, pool: string, nodes: number): Promise<void> {
    const updated = await requestAPI<ICluster>(`clusters/${enc(cluster)}/scale`, {
      method: 'POST',
      body: JSON.stringify({ pool, nodes })
    });
    this._replaceCluster(updated);
  }

  async deleteCluster(name: string): Promise<void> {
    await requestAPI<void>(`clusters/${enc(name)}`, { method: 'DELETE' });
    this.clusters = this.clusters.filter(c => c.name !== name);
    this._chooseCluster();
  }

  /** Create a cluster from a spec: an object, or its JSON or YAML text. */
  async createCluster(spec: unknown): Promise<ICluster> {
    const cluster = await requestAPI<ICluster>('clusters', {
      method: 'POST',
      body: JSON.stringify({ spec })
    });
    this._replaceCluster(cluster);
    return cluster;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    this._feed?.dispose();
    this._feed = null;
    Signal.clearData(this);
  }

  // -- the feed ---------------------------------------------------------------------

  private _connect(): void {
    this._feed?.dispose();
    const feed = (this._feed = new EventFeed(this.cluster));
    feed.message.connect(this._onMessage, this);
    feed.statusChanged.connect(this._emitChanged, this);
    this._emitChanged();
  }

  private _onMessage(feed: EventFeed, { event, data }: IFeedMessage): void {
    if (feed !== this._feed) {
      return; // a late event of a feed we have already replaced
    }
    switch (event) {
      case 'snapshot': {
        const snapshot = data as FeedEvent.ISnapshot;
        this.clusters = snapshot.clusters;
        this._jobs.clear();
        snapshot.jobs.forEach(job => this._upsert(job));
        this.warning = null;
        this.loaded = true;
        this._chooseCluster();
        break;
      }
      case 'clusters':
        this.clusters = (data as FeedEvent.IClusters).clusters;
        this.warning = null;
        this._chooseCluster();
        break;
      case 'job':
        this._upsert(data as IJob);
        break;
      case 'warning':
        this.warning = (data as FeedEvent.IWarning).message;
        break;
    }
    this._emitChanged();
  }

  /** Keep the chosen cluster if it still exists, else choose the first there is. */
  private _chooseCluster(): void {
    if (!this.clusters.some(c => c.name === this.cluster)) {
      this.selectCluster(this.clusters[0]?.name ?? null);
    }
  }

  private _upsert(job: IJob): void {
    if (job.cluster === this.cluster) {
      this._jobs.set(job.id, job);
      this._receivedAt.set(job.id, Date.now());
      this._sortedJobs = null;
      this._emitChanged();
    }
  }

  private _replaceCluster(cluster: ICluster): void {
    const others = this.clusters.filter(c => c.name !== cluster.name);
    this.clusters = [...others, cluster].sort((a, b) => a.created_at - b.created_at);
    this._chooseCluster();
    this._emitChanged();
  }

  /** Many events in one tick (a snapshot of 500 jobs) render once. */
  private _emitChanged(): void {
    if (!this._frame) {
      this._frame = requestAnimationFrame(() => {
        this._frame = 0;
        this._changed.emit();
      });
    }
  }

  private _feed: EventFeed | null = null;
  private _disposed = false;
  private _jobs = new Map<string, IJob>();
  private _sortedJobs: IJob[] | null = null;
  private _receivedAt = new Map<string, number>();
  private _frame = 0;
  private _changed = new Signal<this, void>(this);
}

function enc(part: string): string {
  return encodeURIComponent(part);
}
