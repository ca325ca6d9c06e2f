/**
 * What a job's main-area tabs (its log, its metrics) share: the tab around a view of one
 * job, titled with the job's name once known, and opened once per job.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { IJob, requestAPI } from './api';

/** A view of one job. */
export interface IJobView extends Widget {
  readonly cluster: string;
  readonly jobId: string;
}

/** How a kind of tab names itself: kind `log` gives the id `jupyter-gtc-log-C-N` and the
 * label `Job N log`, then `NAME N log`; noun `Log` the caption `Log of job N on C`. */
export interface IJobTabKind {
  kind: string;
  noun: string;
  icon: LabIcon;
  /** The folder the caption names once the job is known. */
  where: (job: IJob) => string;
}

export function createJobTab<T extends IJobView>(content: T, tabKind: IJobTabKind): MainAreaWidget<T> {
  const { cluster, jobId } = content;
  const { kind, noun } = tabKind;
  const tab = new MainAreaWidget({ content });
  tab.id = `jupyter-gtc-${kind}-${cluster}-${jobId}`;
  tab.title.icon = tabKind.icon;
  tab.title.label = `Job ${jobId} ${kind}`;
  tab.title.caption = `${noun} of job ${jobId} on ${cluster}`;
  tab.title.closable = true;
  requestAPI<IJob>(`jobs/${encodeURIComponent(cluster)}/${encodeURIComponent(jobId)}`)
    .then(job => {
      tab.title.label = `${job.name} ${job.id} ${kind}`;
      tab.title.caption = `${noun} of job ${job.id} (${job.name}) on ${cluster}: ${tabKind.where(job)}`;
    })
    .catch(() => undefined); // the view reports what is wrong
  return tab;
}

/** Show the job's tab of `tracker`'s kind, made by `create` unless one is open already. */
export function openJobTab<T extends IJobView>(
  shell: JupyterFrontEnd.IShell,
  tracker: WidgetTracker<MainAreaWidget<T>>,
  job: { cluster: string; id: string },
  create: (cluster: string, jobId: string) => MainAreaWidget<T>
): void {
  let tab = tracker.find(w => w.content.cluster === job.cluster && w.content.jobId === job.id);
  if (!tab) {
    tab = create(job.cluster, job.id);
    void tracker.add(tab);
    shell.add(tab, 'main');
  }
  shell.activateById(tab.id);
}
