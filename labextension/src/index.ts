/**
 * The jupyter_gtc JupyterLab extension: the "Training Clusters" side panel (clusters with
 * their nodes, the chosen cluster's jobs, live; registered models and their endpoints), job logs and live metrics plots in
 * main-area tabs, and every action as a command in the palette. It talks only to the server extension's REST API
 * (`jupyter_gtc/server/`), which calls the same `api` the magics and the CLI use.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  MainAreaWidget,
  WidgetTracker
} from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';

import { addCommands, CommandIDs } from './commands';
import { IJobView } from './jobtab';
import { JobLog } from './logview';
import { JobMetrics } from './metricsview';
import { ClustersModel } from './model';
import { addModelCommands } from './modelcommands';
import { ModelsModel } from './modelsmodel';
import { createSidebar } from './sidebar';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter_gtc:plugin',
  description: 'Slurm training clusters, jobs, metrics and tuning in JupyterLab.',
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorer, IDocumentManager],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    docManager: IDocumentManager | null
  ): void => {
    const model = new ClustersModel();
    const models = new ModelsModel();
    const sidebar = createSidebar(model, app.commands, models);
    app.shell.add(sidebar, 'left', { rank: 250 });

    const logs = new WidgetTracker<MainAreaWidget<JobLog>>({ namespace: 'jupyter-gtc-log' });
    const metrics = new WidgetTracker<MainAreaWidget<JobMetrics>>({ namespace: 'jupyter-gtc-metrics' });
    addCommands(app, model, sidebar.id, logs, metrics, palette, docManager);
    addModelCommands(app, models, model, palette);
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
      const restoreJobTabs = <T extends IJobView>(tracker: WidgetTracker<MainAreaWidget<T>>, command: string) =>
        restorer.restore(tracker, {
          command,
          args: tab => ({ cluster: tab.content.cluster, id: tab.content.jobId }),
          name: tab => `${tab.content.cluster}/${tab.content.jobId}`
        });
      void restoreJobTabs(logs, CommandIDs.openLog);
      void restoreJobTabs(metrics, CommandIDs.openMetrics);
    }
  }
};

export default plugin;
