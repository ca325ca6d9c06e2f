/**
 * What the sidebar's Models section shows: the registry's models and the deployed endpoints,
 * and the lineage of the models the user unfolded.
 *
 * The change feed (`server/feed.py`) carries clusters, jobs and studies, not the registry: this
 * asks `GET models` and `GET endpoints` itself, every `POLL_MS` while the section is shown (and
 * at once when it is shown again, and after each action of its own), never while it is
 * folded or the sidebar hidden. A model's lineage (`GET models/NAME`) is asked for when it is
 * unfolded, and again when its list entry changes.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { IEndpoint, IEndpointList, IModel, IModelList, IModelSummary, requestAPI } from './api';

/** How often the lists are asked for while the section is shown: the registry changes at a
 * person's pace, and an endpoint's figures cover a minute. */
const POLL_MS = 5000;

export class ModelsModel implements IDisposable {
  /** By name. */
  models: IModelSummary[] = [];
  endpoints: IEndpoint[] = [];
  /** Whether the first answer has come. */
  loaded = false;
  /** Why the last ask failed, until one succeeds. */
  warning: string | null = null;
  /** Versions being deployed from here (`name@version`): a deploy answers once a replica does. */
  deploying = new Set<string>();

  /** Whether the section can be seen now: it polls only then (the section sets it). */
  shown: () => boolean = () => false;

  constructor() {
    this._timer = window.setInterval(() => {
      if (this.shown()) {
        void this.refresh();
      }
    }, POLL_MS);
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** `name`'s versions with their lineage and its history, once asked for (`unfold`). */
  detail(name: string): IModel | null {
    return this._details.get(name) ?? null;
  }

  /** Show `name`'s lineage: asked for now, and again whenever its entry changes. */
  unfold(name: string, open: boolean): void {
    if (open) {
      this._unfolded.add(name);
      void this._askDetail(name);
    } else {
      this._unfolded.delete(name);
    }
  }

  /** Ask for both lists now; `force`: even while an ask is under way (after an action: the
   * answer under way may be older than it, and is then dropped). */
  async refresh(force = false): Promise<void> {
    if ((this._asking && !force) || this._disposed) {
      return; // a slow server is not asked again meanwhile
    }
    const mine = ++this._asked;
    this._asking = true;
    try {
      const [models, endpoints] = await Promise.all([
        requestAPI<IModelList>('models'),
        requestAPI<IEndpointList>('endpoints')
      ]);
      if (mine !== this._asked || this._disposed) {
        return;
      }
      const before = new Map(this.models.map(m => [m.name, JSON.stringify(m)]));
      this.models = models.models;
      this.endpoints = endpoints.endpoints;
      this.loaded = true;
      this.warning = null;
      for (const m of this.models) {
        if (this._unfolded.has(m.name) && before.get(m.name) !== JSON.stringify(m)) {
          void this._askDetail(m.name);
        }
      }
    } catch (error) {
      if (mine === this._asked) {
        this.warning = `Models could not be read: ${(error as Error).message}`;
      }
    } finally {
      if (mine === this._asked && !this._disposed) {
        this._asking = false;
        this._changed.emit();
      }
    }
  }

  /** Apply `alias` to (move it to) `name@version`; `-alias` removes it. */
  async setAlias(name: string, version: number, alias: string): Promise<void> {
    await requestAPI<IModel>(`models/${enc(`${name}@${version}`)}/aliases`, {
      method: 'POST',
      body: JSON.stringify({ aliases: [alias] })
    });
    await this._afterAction(name);
  }

  /** Deploy `name@version` on `cluster`; resolves once a replica answers. */
  async deploy(name: string, version: number, cluster: string, minReplicas: number, maxReplicas: number): Promise<IEndpoint> {
    const ref = `${name}@${version}`;
    this.deploying.add(ref);
    this._changed.emit();
    try {
      return await requestAPI<IEndpoint>(`models/${enc(ref)}/deploy`, {
        method: 'POST',
        body: JSON.stringify({ cluster, min_replicas: minReplicas, max_replicas: maxReplicas })
      });
    } finally {
      this.deploying.delete(ref);
      await this._afterAction(name);
    }
  }

  /** End an endpoint: its replicas' jobs are cancelled. */
  async undeploy(endpoint: IEndpoint): Promise<void> {
    await requestAPI(`endpoints/${enc(endpoint.id)}`, { method: 'DELETE' });
    await this._afterAction(endpoint.model.split('@')[0]);
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    window.clearInterval(this._timer);
    Signal.clearData(this);
  }

  private async _afterAction(name: string): Promise<void> {
    await this.refresh(true);
    if (this._unfolded.has(name)) {
      await this._askDetail(name);
    }
  }

  private async _askDetail(name: string): Promise<void> {
    try {
      const model = await requestAPI<IModel>(`models/${enc(name)}`);
      if (!this._disposed) {
        this._details.set(name, model);
        this._changed.emit();
      }
    } catch {
      // deleted meanwhile, or the server is away: the next list says which
    }
  }

  private _asking = false;
  private _asked = 0; // asks of the lists made: only the newest one's answer is kept
  private _disposed = false;
  private _timer = 0;
  private _details = new Map<string, IModel>();
  private _unfolded = new Set<string>();
  private _changed = new Signal<this, void>(this);
}

function enc(part: string): string {
  return encodeURIComponent(part);
}
