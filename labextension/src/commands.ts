/**
 * Every action of the sidebar is a command: its buttons run them with arguments, and the
 * command palette runs them without, in which case they ask (which job, which pool).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  InputDialog,
  MainAreaWidget,
  Notification,
  showDialog,
  showErrorMessage,
  WidgetTracker
} from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { FileDialog } from '@jupyterlab/filebrowser';
import { ServerConnection } from '@jupyterlab/services';
import { ReadonlyJSONValue, ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { ICluster, IOperation, IStudy, ITrial } from './api';
import { errorMessage, errorToastOptions, notifyError, toastText } from './errors';
import { openJobTab } from './jobtab';
import { createLogTab, JobLog } from './logview';
import { createMetricsTab, JobMetrics } from './metricsview';
import { ClustersModel, JobAction, OperationProgress, resumable, STUDY_FINISHED } from './model';

export namespace CommandIDs {
  export const showSidebar = 'jupyter-gtc:show-sidebar';
  export const refresh = 'jupyter-gtc:refresh';
  export const createCluster = 'jupyter-gtc:create-cluster';
  export const scalePool = 'jupyter-gtc:scale-pool';
  export const deleteCluster = 'jupyter-gtc:delete-cluster';
  export const openLog = 'jupyter-gtc:open-log';
  export const openMetrics = 'jupyter-gtc:open-metrics';
  export const cancelJob = 'jupyter-gtc:cancel-job';
  export const requeueJob = 'jupyter-gtc:requeue-job';
  export const holdJob = 'jupyter-gtc:hold-job';
  export const releaseJob = 'jupyter-gtc:release-job';
  export const stopStudy = 'jupyter-gtc:stop-study';
  export const resumeStudy = 'jupyter-gtc:resume-study';
  export const stopTrial = 'jupyter-gtc:stop-trial';
}

const CATEGORY = 'Training Clusters';

type Args = ReadonlyPartialJSONObject;

export function addCommands(
  app: JupyterFrontEnd,
  model: ClustersModel,
  sidebarId: string,
  logs: WidgetTracker<MainAreaWidget<JobLog>>,
  metrics: WidgetTracker<MainAreaWidget<JobMetrics>>,
  palette: ICommandPalette | null,
  docManager: IDocumentManager | null
): void {
  const { commands } = app;
  const hasCluster = () => model.cluster !== null;

  commands.addCommand(CommandIDs.showSidebar, {
    label: 'Show Training Clusters',
    execute: () => app.shell.activateById(sidebarId)
  });
  commands.addCommand(CommandIDs.refresh, {
    label: 'Refresh Training Clusters',
    execute: () => model.refresh()
  });

  commands.addCommand(CommandIDs.createCluster, {
    label: 'Create a Training Cluster from a Spec File…',
    execute: async args => {
      const path = (args.path as string) ?? (await pickSpecFile(docManager));
      if (!path) {
        return;
      }
      const what = `Creating a cluster from ${path}`;
      let spec: string;
      try {
        const file = await app.serviceManager.contents.get(path, { content: true, format: 'text' });
        spec = file.content;
      } catch (error) {
        notifyError(what, readError(path, error)); // gone since it was chosen, or a path the palette was given
        return;
      }
      await follow(
        progress => model.createCluster(spec, progress),
        what,
        cluster => `Cluster ${(cluster as ICluster).name} is running`
      );
    }
  });

  commands.addCommand(CommandIDs.scalePool, {
    label: args => (args.cluster ? `Scale a Pool of ${args.cluster}…` : 'Scale a Training Cluster Pool…'),
    isEnabled: hasCluster,
    execute: async args => {
      const name = (args.cluster as string) ?? model.cluster;
      const cluster = model.clusters.find(c => c.name === name);
      if (!cluster) {
        return;
      }
      if (cluster.attached) {
        await showErrorMessage(`Cluster ${name} is attached`, 'jupyter_gtc never resizes a cluster it did not create; its admins do.');
        return;
      }
      const login = cluster.spec.orchestrator_spec.slurm_spec.login_node_pool_id;
      const pools = cluster.spec.node_pools.filter(p => p.id !== login);
      const poolId =
        (args.pool as string) ??
        (pools.length === 1
          ? pools[0].id
          : await ask(InputDialog.getItem({ title: `Scale a pool of ${name}`, items: pools.map(p => p.id) })));
      const pool = pools.find(p => p.id === poolId);
      if (!pool) {
        return;
      }
      const nodes =
        (args.nodes as number) ??
        (await ask(InputDialog.getNumber({
          title: `Scale pool ${pool.id} of ${name}`,
          label: `Nodes (${pool.machine_spec.machine_type}); now ${pool.scaling_spec.min_node_count}`,
          value: pool.scaling_spec.min_node_count
        })));
      if (nodes === null || nodes === undefined) {
        return;
      }
      await follow(
        progress => model.scale(name!, pool.id, nodes, progress),
        `Scaling ${name}/${pool.id} to ${nodes} node(s)`,
        () => `${name}/${pool.id} has ${nodes} node(s)`
      );
    }
  });

  commands.addCommand(CommandIDs.deleteCluster, {
    label: args => (args.cluster ? `Delete Cluster ${args.cluster}…` : 'Delete a Training Cluster…'),
    isEnabled: hasCluster,
    execute: async args => {
      const name = (args.cluster as string) ??
        (await ask(InputDialog.getItem({ title: 'Delete a cluster', items: model.clusters.map(c => c.name) })));
      if (!name) {
        return;
      }
      // An attached cluster is only forgotten (detached); one jupyter_gtc made is deleted.
      const attached = model.clusters.find(c => c.name === name)?.attached ?? false;
      const [verb, doing, done] = attached ? ['Detach', 'Detaching', 'detached'] : ['Delete', 'Deleting', 'deleted'];
      const answer = await showDialog({
        title: `${verb} cluster ${name}?`,
        body: attached
          ? 'jupyter_gtc forgets it. Its jobs keep running and their folders stay on the cluster.'
          : 'Its running jobs are cancelled, its nodes stopped and its files removed. This cannot be undone.',
        buttons: [Dialog.cancelButton(), (attached ? Dialog.okButton : Dialog.warnButton)({ label: verb })]
      });
      if (answer.button.accept) {
        await follow(progress => model.deleteCluster(name, progress), `${doing} ${name}`, () => `Cluster ${name} ${done}`);
      }
    }
  });

  commands.addCommand(CommandIDs.openLog, {
    label: args => (args.id ? `Open the Log of Job ${args.id}` : 'Open a Job Log…'),
    isEnabled: hasCluster,
    execute: async args => {
      const job = await pickJob(model, args, 'Open the log of a job');
      if (!job) {
        return;
      }
      openJobTab(app.shell, logs, job, createLogTab);
    }
  });

  commands.addCommand(CommandIDs.openMetrics, {
    label: args => (args.id ? `Plot the Metrics of Job ${args.id}` : 'Plot a Job’s Metrics…'),
    isEnabled: hasCluster,
    execute: async args => {
      const job = await pickJob(model, args, 'Plot the metrics of a job');
      if (!job) {
        return;
      }
      openJobTab(app.shell, metrics, job, createMetricsTab);
    }
  });

  const jobAction = (id: string, action: JobAction, verb: string) =>
    commands.addCommand(id, {
      label: args => (args.id ? `${verb} Job ${args.id}` : `${verb} a Job…`),
      isEnabled: hasCluster,
      execute: async args => {
        const job = await pickJob(model, args, `${verb} a job`);
        if (job) {
          await notifyFailure(model.act(job, action), `${verb} job ${job.id}`);
        }
      }
    });
  jobAction(CommandIDs.cancelJob, 'cancel', 'Cancel');
  jobAction(CommandIDs.requeueJob, 'requeue', 'Requeue');
  jobAction(CommandIDs.holdJob, 'hold', 'Hold');
  jobAction(CommandIDs.releaseJob, 'release', 'Release');

  commands.addCommand(CommandIDs.stopStudy, {
    label: args => (args.study ? `Stop Study ${args.study}…` : 'Stop a Tuning Study…'),
    isEnabled: () => model.studies.some(s => !STUDY_FINISHED.has(s.state)),
    execute: async args => {
      const name = await pickStudy(model, args, 'Stop a study', s => !STUDY_FINISHED.has(s.state));
      if (!name) {
        return;
      }
      const answer = await showDialog({
        title: `Stop study ${name}?`,
        body: 'Its running trials are cancelled and recorded as stopped early. Finished trials are kept.',
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Stop' })]
      });
      if (answer.button.accept) {
        await notifyFailure(model.actOnStudy(name, 'stop'), `Stop study ${name}`);
      }
    }
  });

  commands.addCommand(CommandIDs.resumeStudy, {
    label: args => (args.study ? `Resume Study ${args.study}` : 'Resume a Tuning Study…'),
    caption: 'Drive the study from this Jupyter server: finished trials are kept, running ones followed again',
    isEnabled: () => model.studies.some(resumable),
    execute: async args => {
      const name = await pickStudy(model, args, 'Resume a study', resumable);
      if (name) {
        await notifyFailure(model.actOnStudy(name, 'resume'), `Resume study ${name}`);
      }
    }
  });

  commands.addCommand(CommandIDs.stopTrial, {
    label: args => (args.trial ? `Stop Trial ${args.trial} of ${args.study}` : 'Stop a Tuning Trial…'),
    isEnabled: () => model.studies.some(s => s.counts.RUNNING > 0),
    execute: async args => {
      const name = await pickStudy(model, args, 'Stop a trial of a study', s => s.counts.RUNNING > 0);
      if (!name) {
        return;
      }
      const trial = (args.trial as string) ?? (await pickRunningTrial(model, name));
      if (trial) {
        await notifyFailure(model.stopTrial(name, trial), `Stop trial ${trial} of ${name}`);
      }
    }
  });

  for (const command of Object.values(CommandIDs)) {
    palette?.addItem({ command, category: CATEGORY });
  }
}

/** The job named by `args` (`cluster`, `id`), or one the user picks from the current cluster's. */
async function pickJob(
  model: ClustersModel,
  args: Args,
  title: string
): Promise<{ cluster: string; id: string } | null> {
  if (args.id) {
    return { cluster: (args.cluster as string) ?? model.cluster!, id: String(args.id) };
  }
  const items = model.jobs.map(j => `${j.id}  ${j.name}  (${j.state})`);
  const picked = await ask(InputDialog.getItem({ title, items }));
  return picked && model.cluster ? { cluster: model.cluster, id: picked.split(' ')[0] } : null;
}

/** The study named by `args.study`, or one the user picks of those `which` accepts. */
async function pickStudy(
  model: ClustersModel,
  args: Args,
  title: string,
  which: (study: IStudy) => boolean
): Promise<string | null> {
  if (args.study) {
    return String(args.study);
  }
  const items = model.studies.filter(which).map(s => s.name);
  return ask(InputDialog.getItem({ title, items }));
}

/** A spec file the user picks in JupyterLab's file dialog (JSON or YAML; folders to browse),
 * or a path typed in where no document manager is there to browse with. */
async function pickSpecFile(docManager: IDocumentManager | null): Promise<string | null> {
  if (!docManager) {
    return ask(InputDialog.getText({
      title: 'Create a cluster from a spec file',
      label: 'Path of a cluster spec (.json or .yaml), relative to the Jupyter root',
      placeholder: 'examples/clusters/local-a3.yaml'
    }));
  }
  const chosen = await ask(FileDialog.getOpenFiles({
    manager: docManager,
    title: 'Create a cluster from a spec file',
    label: 'A cluster spec (.json, or .yaml)',
    filter: item => (item.type === 'directory' || SPEC_FILE.test(item.name) ? {} : null)
  }));
  const file = (chosen ?? []).find(item => item.type !== 'directory'); // nothing chosen: the folder
  return file?.path ?? null;
}

const SPEC_FILE = /\.(json|ya?ml)$/i;

/** Why `path` could not be read, in words: the contents API's 404 says only "Not Found". */
function readError(path: string, error: unknown): unknown {
  if (error instanceof ServerConnection.ResponseError && error.response.status === 404) {
    return new Error(`there is no file ${path} under the Jupyter root`);
  }
  return error;
}

/** A running trial of study `name` the user picks, by id; the list shows each one's parameters. */
async function pickRunningTrial(model: ClustersModel, name: string): Promise<string | null> {
  const running = (model.studies.find(s => s.name === name)?.trials ?? []).filter(t => t.state === 'RUNNING');
  const items = running.map(trialChoice);
  const picked = await ask(InputDialog.getItem({ title: `Stop a trial of ${name}`, items, current: 0 }));
  return running[items.indexOf(picked ?? '')]?.trial_id ?? null;
}

/** "trial 3: lr=0.01, layers=2" */
function trialChoice(trial: ITrial): string {
  const params = Object.entries(trial.params).map(([k, v]) => `${k}=${v}`).join(', ');
  return `trial ${trial.trial_id}${params ? `: ${params}` : ''}`;
}

/** Wait for `action`; a failure is an error toast that says why, with the whole message a
 * click away. */
async function notifyFailure(action: Promise<unknown>, what: string): Promise<void> {
  try {
    await action;
  } catch (error) {
    notifyError(what, error);
  }
}

/** A dialog's value, or null when it was cancelled. */
async function ask<T>(dialog: Promise<Dialog.IResult<T>>): Promise<T | null> {
  const result = await dialog;
  return result.button.accept ? result.value : null;
}

/**
 * A toast that follows a create, scale or delete: its steps as they happen ("Creating a
 * cluster from a.yaml… starting slurmd 2/3"), then how it ended.
 */
async function follow(
  start: (progress: OperationProgress) => Promise<unknown>,
  pending: string,
  done: (result: unknown) => string
): Promise<void> {
  const toast = new ProgressToast(`${pending}…`);
  try {
    const result = await start((op: IOperation) => {
      if (op.state === 'RUNNING' && op.message) {
        toast.update(toastText(`${pending}… ${op.message}`));
      }
    });
    // The model already holds the result (it updates before an operation resolves); say
    // "done" once the sidebar has drawn it too, so no card still reads CREATING beside it.
    await nextPaint();
    await toast.finish(done(result), 'success', { autoClose: 4000 });
  } catch (error) {
    const message = errorMessage(error);
    const text = `${pending} failed: ${message}`;
    await toast.finish(toastText(text), 'error', errorToastOptions(`${pending} failed`, text, message));
  }
}

/** After the next frame has been drawn: Lumino renders widgets' updates at an animation
 * frame, and React commits what they render before the frame after. */
function nextPaint(): Promise<void> {
  return new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(() => resolve())));
}

/** An in-progress toast whose text changes. JupyterLab loses an update that comes before
 * react-toastify counts the toast as active: it then emits the toast again under its id,
 * which react-toastify drops as a duplicate, and the toast spins on "Creating…" for good.
 * react-toastify counts a toast active only in an effect after the toast is on the page,
 * and the first toast of a page waits for react-toastify to load, which on a loaded machine
 * took longer than a create (0.3 s). So an update waits until the toast is on the page, and
 * is made again until the toast shows it. */
class ProgressToast {
  constructor(message: string) {
    this._id = Notification.emit(message, 'in-progress', { autoClose: false });
    this._shown = onPage(this._id, TOAST_SHOWN_WITHIN_MS);
  }

  update(message: string): void {
    if (message === this._latest) {
      return; // the feed tells of an operation's other changes too
    }
    this._latest = message;
    const current = () => !this._finished && this._latest === message;
    void this._shown.then(() => this._apply(current, { message, type: 'in-progress', autoClose: false }));
  }

  async finish(message: string, type: 'success' | 'error', options: Notification.IOptions<ReadonlyJSONValue>): Promise<void> {
    this._finished = true;
    await this._shown;
    await this._apply(() => true, { message, type, ...options });
  }

  private async _apply(current: () => boolean, update: Omit<Notification.IUpdate<ReadonlyJSONValue>, 'id'>): Promise<void> {
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS && current(); attempt++) {
      const before = this._text();
      Notification.update({ id: this._id, ...update });
      if (before === null) {
        return; // not on the page (muted, or closed by the user): the notification list shows it
      }
      await new Promise(resolve => setTimeout(resolve, UPDATE_SHOWN_MS));
      if (this._text() !== before) {
        return; // shown, or gone from the page
      }
    }
  }

  /** The text the toast shows, or null while it is not on the page. */
  private _text(): string | null {
    return document.getElementById(this._id)?.querySelector('.jp-toast-message')?.textContent ?? null;
  }

  private _id: string;
  private _latest = '';
  private _finished = false;
  private _shown: Promise<void>;
}

/** Toasts muted ("do not disturb") never show; their updates go to the notification list. */
const TOAST_SHOWN_WITHIN_MS = 10_000;
const UPDATE_SHOWN_MS = 200;
const UPDATE_ATTEMPTS = 50;

/** Resolves once an element with this id is on the page (react-toastify gives a toast's
 * element the toast's id, and JupyterLab makes that the notification's), or after `withinMs`. */
function onPage(id: string, withinMs: number): Promise<void> {
  return new Promise(resolve => {
    const done = (): void => {
      observer.disconnect();
      clearTimeout(timer);
      resolve();
    };
    const observer = new MutationObserver(() => {
      if (document.getElementById(id)) {
        done();
      }
    });
    const timer = setTimeout(done, withinMs);
    observer.observe(document.body, { childList: true, subtree: true });
  });
}
