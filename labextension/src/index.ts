import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

/**
 * The jupyter_gtc front-end plugin.
 *
 * A placeholder for now: the cluster sidebar will be added here.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter_gtc:plugin',
  description: 'Slurm training clusters, jobs, metrics and tuning in JupyterLab.',
  autoStart: true,
  activate: (app: JupyterFrontEnd): void => {
    console.log('jupyter_gtc labextension is activated');
  }
};

export default plugin;
