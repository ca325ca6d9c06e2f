/**
 * A job's log in a main-area tab that follows the file as the job writes it, by range
 * reads (`GET jobs/<cluster>/<id>/log?offset=`): each read asks only for what is new.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { textEditorIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { ILogChunk, requestAPI } from './api';
import { createJobTab } from './jobtab';

const FOLLOW_MS = 1000; // while the job runs
const FINISHED_MS = 5000; // after: a requeued job writes again
const RETRY_MS = 3000; // while the server cannot be reached
const MAX_CHARS = 4_000_000; // the tab keeps the newest output past this

export class JobLog extends Widget {
  constructor(
    readonly cluster: string,
    readonly jobId: string
  ) {
    super();
    this.addClass('jp-gtc-JobLog');
    this._status = document.createElement('div');
    this._status.className = 'jp-gtc-JobLog-status';
    this._text = document.createElement('pre');
    this._text.className = 'jp-gtc-JobLog-text';
    this.node.append(this._status, this._text);
    void this._follow();
  }

  /** Everything shown so far. */
  get text(): string {
    return this._text.textContent ?? '';
  }

  private async _follow(): Promise<void> {
    const path = `jobs/${encodeURIComponent(this.cluster)}/${encodeURIComponent(this.jobId)}/log`;
    while (!this.isDisposed) {
      let delay = FOLLOW_MS;
      try {
        const query = this._offset === null ? '' : `?offset=${this._offset}`;
        const chunk = await requestAPI<ILogChunk>(path + query);
        this._show(chunk);
        if (chunk.next_offset < chunk.size) {
          delay = 0; // more is there already
        } else if (chunk.finished) {
          delay = FINISHED_MS;
        }
        this._setStatus(chunk.finished ? 'The job has finished.' : 'Following the log as the job writes it…');
      } catch (error) {
        this._setStatus(`Cannot read the log: ${(error as Error).message}. Retrying…`);
        delay = RETRY_MS;
      }
      await new Promise(resolve => setTimeout(resolve, delay));
    }
  }

  private _show(chunk: ILogChunk): void {
    if (this._offset === null && chunk.offset > 0) {
      this._append(`[… the first ${chunk.offset} bytes are not shown …]\n`);
    } else if (this._offset !== null && chunk.offset !== this._offset) {
      this._text.textContent = ''; // the log started over (a requeue)
    }
    this._offset = chunk.next_offset;
    if (chunk.text) {
      this._append(chunk.text);
    }
  }

  private _append(text: string): void {
    const node = this.node;
    const atBottom = node.scrollTop + node.clientHeight >= node.scrollHeight - 8;
    this._text.append(document.createTextNode(text));
    this._chars += text.length;
    while (this._chars > MAX_CHARS && this._text.firstChild) {
      this._chars -= this._text.firstChild.textContent?.length ?? 0;
      this._text.firstChild.remove();
    }
    if (atBottom) {
      node.scrollTop = node.scrollHeight;
    }
  }

  private _setStatus(message: string): void {
    if (this._status.textContent !== message) {
      this._status.textContent = message;
    }
  }

  private _offset: number | null = null;
  private _chars = 0;
  private _status: HTMLElement;
  private _text: HTMLElement;
}

/** The tab: a `MainAreaWidget` titled with the job's name once known. */
export function createLogTab(cluster: string, jobId: string): MainAreaWidget<JobLog> {
  return createJobTab(new JobLog(cluster, jobId), {
    kind: 'log',
    noun: 'Log',
    icon: textEditorIcon,
    where: job => job.log_path ?? job.job_dir ?? 'no log known'
  });
}
