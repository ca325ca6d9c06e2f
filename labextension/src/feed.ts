/**
 * The client of the server's change feed (`GET gtc/api/events`, server-sent events).
 *
 * Read with `fetch` through `ServerConnection`, so it carries the same token and headers as
 * every other request. It reconnects by itself (after a server restart, a network hiccup, or
 * 45 s of silence where the server sends a keep-alive every 15 s); each connection starts
 * with a snapshot, so nothing is missed while it was away.
 */
import { ServerConnection } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { apiUrl } from './api';

/** One event: its name (`snapshot`, `clusters`, `job`, `warning`) and parsed data. */
export interface IFeedMessage {
  event: string;
  data: any;
}

export type FeedStatus = 'connecting' | 'open' | 'reconnecting';

const SILENCE_LIMIT_MS = 45_000;
const MAX_BACKOFF_MS = 5_000;

export class EventFeed implements IDisposable {
  /** Follow the feed of `cluster`'s jobs (null: clusters only). */
  constructor(readonly cluster: string | null) {
    void this._run();
  }

  get message(): ISignal<this, IFeedMessage> {
    return this._message;
  }

  get statusChanged(): ISignal<this, FeedStatus> {
    return this._statusChanged;
  }

  get status(): FeedStatus {
    return this._status;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._abort?.abort();
    Signal.clearData(this);
  }

  private async _run(): Promise<void> {
    let backoff = 500;
    while (!this._isDisposed) {
      try {
        await this._readOnce(() => {
          backoff = 500; // connected: a later drop retries quickly again
        });
      } catch (error) {
        if (this._isDisposed) {
          return;
        }
        console.debug('jupyter_gtc: change feed interrupted', error);
      }
      this._setStatus('reconnecting');
      await new Promise(resolve => setTimeout(resolve, backoff));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  private async _readOnce(onOpen: () => void): Promise<void> {
    const abort = (this._abort = new AbortController());
    const query = this.cluster
      ? `?cluster=${encodeURIComponent(this.cluster)}`
      : '';
    const response = await ServerConnection.makeRequest(
      apiUrl(`events${query}`),
      { signal: abort.signal, cache: 'no-store' },
      ServerConnection.makeSettings()
    );
    if (!response.ok || !response.body) {
      throw new Error(`HTTP ${response.status}`);
    }
    this._setStatus('open');
    onOpen();
    let silence = setTimeout(() => abort.abort(), SILENCE_LIMIT_MS);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          return;
        }
        clearTimeout(silence);
        silence = setTimeout(() => abort.abort(), SILENCE_LIMIT_MS);
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          this._dispatch(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } finally {
      clearTimeout(silence);
      abort.abort();
    }
  }

  /** One event block: `event: NAME` and `data: JSON` lines; `: ...` lines are keep-alives. */
  private _dispatch(block: string): void {
    let event = 'message';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) {
        event = line.slice(7);
      } else if (line.startsWith('data: ')) {
        data += line.slice(6);
      }
    }
    if (data && !this._isDisposed) {
      this._message.emit({ event, data: JSON.parse(data) });
    }
  }

  private _setStatus(status: FeedStatus): void {
    if (status !== this._status && !this._isDisposed) {
      this._status = status;
      this._statusChanged.emit(status);
    }
  }

  private _abort: AbortController | null = null;
  private _isDisposed = false;
  private _status: FeedStatus = 'connecting';
  private _message = new Signal<this, IFeedMessage>(this);
  private _statusChanged = new Signal<this, FeedStatus>(this);
}
