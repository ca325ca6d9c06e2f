/**
 * What the sidebar shows, kept current by the change feed: the clusters, the chosen
 * cluster (remembered across page reloads), its jobs and tuning studies, and the creates,
 * scales and deletes running in the background. Sections render from it and call its
 * actions; none of them talks to the server on its own.
 *
 * Each cluster's remediation history (its supervisor's events) is not in the feed: it is
 * asked for (`GET clusters/<name>/events?since=<newest held>`, an empty answer when nothing
 * happened) whenever the feed says a cluster or node changed, and every few seconds while
 * the feed is open, since a remediation's last step need not change a node's state.
 */
import { ServerConnection } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import {
  ApiError,
  FeedEvent,
  ICluster,
  IClusterEvent,
  IClusterEventList,
  IJob,
  IOperation,
  IStudy,
  requestAPI
} from './api';
import { EventFeed, FeedStatus, IFeedMessage } from './feed';

/** Actions on a job, each a `POST jobs/<cluster>/<id>/<action>`. */
export type JobAction = 'cancel' | 'requeue' | 'hold' | 'release';

/** Actions on a study, each a `POST studies/<name>/<action>`. */
export type StudyAction = 'stop' | 'resume';

/** Called with each step of an operation the caller started. */
export type OperationProgress = (operation: IOperation) => void;

/** Study states after which it does nothing more. */
export const STUDY_FINISHED = new Set(['SUCCEEDED', 'FAILED', 'STOPPED']);

/** A study that waits for a process to drive it (after a restart, or once stopped). */
export function resumable(study: IStudy): boolean {
  return !study.driven && study.state !== 'SUCCEEDED' && study.state !== 'FAILED';
}

export class ClustersModel implements IDisposable {
  /** Every cluster, oldest first, with its nodes. */
  clusters: ICluster[] = [];
  /** The chosen cluster, whose jobs `jobs` holds. */
  cluster: string | null = null;
  /** A failed tick of the feed, until the next one succeeds. */
  warning: string | null = null;
  /** Whether the first snapshot has arrived. */
  loaded = false;
  /** Creates, scales and deletes by id: running, and finished ones the server still keeps. */
  operations = new Map<string, IOperation>();
  /** The chosen cluster's tuning studies, newest first. */
  studies: IStudy[] = [];

  constructor() {
    this.cluster = ChosenCluster.load()?.name ?? null;
    this._connect();
    this._eventsTimer = window.setInterval(() => {
      if (this.status === 'open') {
        this._askEvents();
      }
    }, EVENTS_POLL_MS);
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

  /** What happened to `cluster`'s nodes (its supervisor's decisions), oldest first; the
   * newest `EVENTS_KEPT` at most. */
  eventsOf(cluster: string): IClusterEvent[] {
    return this._events.get(cluster)?.events ?? NO_EVENTS;
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

  /** Show `name`'s jobs; a choice the user made is remembered across page reloads. */
  selectCluster(name: string | null, remember = true): void {
    if (remember && name) {
      ChosenCluster.save(name);
    }
    if (name !== this.cluster) {
      this.cluster = name;
      this._shownSince = Date.now();
      this.studies = [];
      this._jobs.clear();
      this._sortedJobs = null;
      this._connect();
    }
  }

  /** What the panel shows of `cluster`'s operations: the running one, else the latest
   * failure not yet dismissed. */
  operationOf(cluster: string): IOperation | null {
    let shown: IOperation | null = null;
    for (const op of this.operations.values()) {
      if (op.cluster === cluster && (op.state === 'RUNNING' || (op.state === 'FAILED' && !this._dismissed.has(op.id)))) {
        shown = !shown || op.state === 'RUNNING' || shown.state !== 'RUNNING' ? op : shown;
      }
    }
    return shown;
  }

  /** Operations to show of clusters that have no card: a create not yet listed, or one
   * that failed (and was rolled back). */
  get strayOperations(): IOperation[] {
    const names = new Set(this.clusters.map(c => c.name));
    const clusters = new Set([...this.operations.values()].map(op => op.cluster).filter(c => !names.has(c)));
    return [...clusters].map(c => this.operationOf(c)).filter((op): op is IOperation => op !== null);
  }

  /** Stop showing a failed operation. */
  dismiss(operationId: string): void {
    this._dismissed.add(operationId);
    this._emitChanged();
  }

  /** Start over from a fresh snapshot. */
  refresh(): void {
    this._connect();
  }

  /** Cancel, requeue, hold or release a job. The answer shows at once, unless the feed has
   * sent the job meanwhile: the answer can have been read before the action's own tick (the
   * two come over different connections), and must not turn a held job back to pending. */
  async act(job: { cluster: string; id: string }, action: JobAction): Promise<void> {
    const path = `jobs/${enc(job.cluster)}/${enc(job.id)}/${action}`;
    const asked = this._feedEvents;
    const answer = await requestAPI<IJob>(path, { method: 'POST' });
    if ((this._fedAt.get(answer.id) ?? -1) < asked) {
      this._upsert(answer);
    }
  }

  /** Stop a study (its running trials are cancelled) or resume it (this server drives it). */
  async actOnStudy(name: string, action: StudyAction): Promise<void> {
    this._upsertStudy(await requestAPI<IStudy>(`studies/${enc(name)}/${action}`, { method: 'POST' }));
  }

  /** Stop one running trial of a study (its job is cancelled; it is recorded as pruned). */
  async stopTrial(name: string, trialId: string): Promise<void> {
    const path = `studies/${enc(name)}/trials/${enc(trialId)}/stop`;
    this._upsertStudy(await requestAPI<IStudy>(path, { method: 'POST' }));
  }

  /** Scale a pool; resolves with the cluster once done, rejects with why it failed. */
  async scale(cluster: string, pool: string, nodes: number, progress?: OperationProgress): Promise<ICluster> {
    const started = await requestAPI<IOperation>(`clusters/${enc(cluster)}/scale`, {
      method: 'POST',
      body: JSON.stringify({ pool, nodes })
    });
    return (await this._follow(started, progress)).result!;
  }

  /** Delete a cluster; resolves once it is gone. */
  async deleteCluster(name: string, progress?: OperationProgress): Promise<void> {
    const started = await requestAPI<IOperation>(`clusters/${enc(name)}`, { method: 'DELETE' });
    await this._follow(started, progress);
    this.clusters = this.clusters.filter(c => c.name !== name);
    this._chooseCluster();
    this._emitChanged();
  }

  /** Create a cluster from a spec (an object, or its JSON or YAML text); resolves with the
   * cluster once every node is up. */
  async createCluster(spec: unknown, progress?: OperationProgress): Promise<ICluster> {
    const started = await requestAPI<IOperation>('clusters', {
      method: 'POST',
      body: JSON.stringify({ spec })
    });
    return (await this._follow(started, progress)).result!;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    window.clearInterval(this._eventsTimer);
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
        snapshot.jobs.forEach(job => this._upsertFed(job));
        this.studies = snapshot.studies ?? [];
        this._replaceOperations(snapshot.operations ?? []);
        this.warning = null;
        this.loaded = true;
        this._chooseCluster();
        this._askEvents();
        break;
      }
      case 'operation':
        this._updateOperation(data as FeedEvent.IOperationEvent);
        break;
      case 'clusters':
        this.clusters = (data as FeedEvent.IClusters).clusters;
        this.warning = null;
        this._chooseCluster();
        this._askEvents();
        break;
      case 'job':
        this._upsertFed(data as IJob);
        break;
      case 'studies': {
        const studies = data as FeedEvent.IStudies;
        if (studies.cluster === this.cluster) {
          this.studies = studies.studies;
        }
        break;
      }
      case 'warning':
        this.warning = (data as FeedEvent.IWarning).message;
        break;
    }
    this._emitChanged();
  }

  /** Follow what the user does: a cluster created since the one shown was chosen (a
   * notebook's, `gtc cluster create`) is shown, unless the user chose one in the last
   * `RECENT_CHOICE_MS` (then the view stays theirs); a cluster gone gives its place to the
   * newest. (It was: the cluster last clicked, whatever came after, so a study on a cluster
   * a notebook had just created showed as "No tuning studies on this cluster".) */
  private _chooseCluster(): void {
    const newest = this.clusters.reduce<ICluster | null>(
      (a, c) => (a === null || c.created_at >= a.created_at ? c : a), null);
    if (!this.clusters.some(c => c.name === this.cluster)) {
      this.selectCluster(newest?.name ?? null, false);
      return;
    }
    const chosen = ChosenCluster.load();
    const since = Math.max(chosen?.at ?? 0, this._shownSince);
    const recent = chosen !== null && Date.now() - chosen.at < RECENT_CHOICE_MS;
    if (newest && newest.name !== this.cluster && newest.created_at * 1000 > since && !recent) {
      this.selectCluster(newest.name, false);
    }
  }

  // -- remediation history ----------------------------------------------------------

  /** Ask for each cluster's events newer than those held (one request per cluster at a time). */
  private _askEvents(): void {
    for (const name of this._events.keys()) {
      if (!this.clusters.some(c => c.name === name)) {
        this._events.delete(name); // deleted: its events went with it
      }
    }
    for (const cluster of this.clusters) {
      if (!this._eventsAsked.has(cluster.name)) {
        void this._askEventsOf(cluster);
      }
    }
  }

  private async _askEventsOf(cluster: ICluster): Promise<void> {
    const name = cluster.name;
    let held = this._events.get(name);
    if (held && held.createdAt !== cluster.created_at) {
      held = undefined; // made anew under the same name: the old one's events are gone
    }
    const newest = held?.events[held.events.length - 1];
    const since = newest ? `?since=${newest.time}` : '';
    this._eventsAsked.add(name);
    try {
      const { events } = await requestAPI<IClusterEventList>(`clusters/${enc(name)}/events${since}`);
      if (this._disposed || (held && this._events.get(name) !== held)) {
        return;
      }
      if (events.length || !held) {
        const all = [...(held?.events ?? []), ...events];
        this._events.set(name, { createdAt: cluster.created_at, events: all.slice(-EVENTS_KEPT) });
        this._emitChanged();
      }
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        this._events.delete(name);
      } // else: the server is away; the next tick asks again
    } finally {
      this._eventsAsked.delete(name);
    }
  }

  // -- operations -------------------------------------------------------------------

  /** Resolves with the operation once it is DONE; rejects with its error once FAILED. */
  private _follow(started: IOperation, progress?: OperationProgress): Promise<IOperation> {
    if (!this.operations.has(started.id)) {
      this.operations.set(started.id, started); // the feed may have told of it already, and of more
      this._emitChanged();
    }
    return new Promise<IOperation>((resolve, reject) => {
      const follower: IFollower = { resolve, reject, progress };
      this._followers.set(started.id, [...(this._followers.get(started.id) ?? []), follower]);
      const current = this.operations.get(started.id)!;
      progress?.(current);
      this._settle(current);
      void this._pollWhileOffline(started.id);
    });
  }

  private _updateOperation(op: IOperation): void {
    const before = this.operations.get(op.id);
    if (before && before.state !== 'RUNNING' && op.state === 'RUNNING') {
      return; // a late answer: an operation that ended never runs again
    }
    this.operations.set(op.id, op);
    this._followers.get(op.id)?.forEach(f => f.progress?.(op));
    if (op.state === 'DONE' && op.result && before?.state !== 'DONE') {
      this._replaceCluster(op.result); // at once, before the caller hears it is done
    }
    this._emitChanged();
    this._settle(op);
  }

  private _settle(op: IOperation): void {
    if (op.state === 'RUNNING') {
      return;
    }
    const followers = this._followers.get(op.id) ?? [];
    this._followers.delete(op.id);
    for (const f of followers) {
      if (op.state === 'DONE') {
        f.resolve(op);
      } else {
        f.reject(new ApiError(500, op.error?.kind ?? 'Error', op.error?.message ?? `${op.action} failed`));
      }
    }
  }

  /** A (re)connected feed's operations replace ours; one we follow that the server no
   * longer knows is asked for: gone means the server restarted meanwhile. */
  private _replaceOperations(operations: IOperation[]): void {
    const before = this.operations;
    this.operations = new Map(
      operations.map(op => {
        const known = before.get(op.id); // an answer newer than the snapshot may have ended it
        return [op.id, known && known.state !== 'RUNNING' && op.state === 'RUNNING' ? known : op];
      })
    );
    this.operations.forEach(op => this._settle(op));
    for (const id of this._followers.keys()) {
      if (!this.operations.has(id)) {
        this.operations.set(id, before.get(id)!); // _follow put it there
        void this._ask(id);
      }
    }
  }

  /** While the feed is down, ask for a followed operation every few seconds. */
  private async _pollWhileOffline(id: string): Promise<void> {
    while (this._followers.has(id) && !this._disposed) {
      await new Promise(resolve => setTimeout(resolve, OFFLINE_POLL_MS));
      if (this._followers.has(id) && this.status !== 'open') {
        await this._ask(id);
      }
    }
  }

  private async _ask(id: string): Promise<void> {
    try {
      this._updateOperation(await requestAPI<IOperation>(`operations/${enc(id)}`));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        this._updateOperation({
          ...this.operations.get(id)!,
          state: 'FAILED',
          error: {
            kind: 'OperationLost',
            message: 'the Jupyter server restarted while it ran; the cluster list shows how far it got'
          }
        });
      } // else: the server is away; the next poll or snapshot asks again
    }
  }

  private _upsertFed(job: IJob): void {
    this._fedAt.set(job.id, ++this._feedEvents);
    this._upsert(job);
  }

  private _upsert(job: IJob): void {
    if (job.cluster === this.cluster) {
      this._jobs.set(job.id, job);
      this._receivedAt.set(job.id, Date.now());
      this._sortedJobs = null;
      this._emitChanged();
    }
  }

  /** An action's answer, at once: the feed's studies event follows. */
  private _upsertStudy(study: IStudy): void {
    if (study.cluster === this.cluster) {
      this.studies = this.studies.map(s => (s.name === study.name ? study : s));
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
  private _followers = new Map<string, IFollower[]>();
  private _dismissed = new Set<string>();
  private _disposed = false;
  private _jobs = new Map<string, IJob>();
  /** When the cluster shown became so (ms since the epoch); 0 for the one the page opened on. */
  private _shownSince = 0;
  private _sortedJobs: IJob[] | null = null;
  private _receivedAt = new Map<string, number>();
  private _feedEvents = 0; // jobs the feed has sent, counted
  private _fedAt = new Map<string, number>(); // job id -> the count when the feed last sent it
  private _frame = 0;
  private _changed = new Signal<this, void>(this);
  private _events = new Map<string, { createdAt: number; events: IClusterEvent[] }>();
  private _eventsAsked = new Set<string>(); // clusters whose events are being asked for
  private _eventsTimer = 0;
}

/** Someone waiting for an operation to end. */
interface IFollower {
  resolve: (op: IOperation) => void;
  reject: (error: Error) => void;
  progress?: OperationProgress;
}

const OFFLINE_POLL_MS = 3000;
/** How often each cluster's events are asked for while the feed is open (and at once when
 * it says a cluster or node changed). */
const EVENTS_POLL_MS = 5000;
/** Events held per cluster: the newest. */
export const EVENTS_KEPT = 500;
const NO_EVENTS: IClusterEvent[] = [];

/** How long the user's own choice of a cluster holds against a newer cluster. */
const RECENT_CHOICE_MS = 30_000;

/** The chosen cluster in the browser's storage, per server (its base URL), with when it was
 * chosen: it outlives page reloads and `?reset`, and two servers on one host keep their own. */
namespace ChosenCluster {
  const key = () => `jupyter-gtc:cluster:${ServerConnection.makeSettings().baseUrl}`;

  export function load(): { name: string; at: number } | null {
    let text: string | null;
    try {
      text = window.localStorage.getItem(key());
    } catch {
      return null; // storage disabled
    }
    if (text === null) {
      return null;
    }
    try {
      const stored = JSON.parse(text);
      if (typeof stored?.name === 'string' && typeof stored?.at === 'number') {
        return stored;
      }
    } catch {
      // a name stored by an older version: chosen long ago
    }
    return { name: text, at: 0 };
  }

  export function save(name: string): void {
    try {
      window.localStorage.setItem(key(), JSON.stringify({ name, at: Date.now() }));
    } catch {
      // storage disabled or full: the choice lasts this page only
    }
  }
}

function enc(part: string): string {
  return encodeURIComponent(part);
}
