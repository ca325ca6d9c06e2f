/**
 * The Models section's actions as commands, as every other action of the sidebar is: its
 * buttons run them with arguments; the command palette runs them without, and then they ask
 * which version (or endpoint).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, ICommandPalette, InputDialog, Notification, showDialog } from '@jupyterlab/apputils';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';

import { notifyError } from './errors';
import { ClustersModel } from './model';
import { ModelsModel } from './modelsmodel';

export namespace ModelCommandIDs {
  export const setAlias = 'jupyter-gtc:set-model-alias';
  export const deploy = 'jupyter-gtc:deploy-model';
  export const undeploy = 'jupyter-gtc:undeploy-endpoint';
}

const CATEGORY = 'Training Clusters';

type Args = ReadonlyPartialJSONObject;

export function addModelCommands(
  app: JupyterFrontEnd,
  models: ModelsModel,
  clusters: ClustersModel,
  palette: ICommandPalette | null
): void {
  const { commands } = app;
  const hasModels = () => models.models.length > 0;

  commands.addCommand(ModelCommandIDs.setAlias, {
    label: args => (args.model ? `Set an Alias of ${args.model}@${args.version}…` : 'Set a Model Version’s Alias…'),
    isEnabled: hasModels,
    execute: async args => {
      const version = await pickVersion(models, args, 'Set an alias of which version?');
      if (!version) {
        return;
      }
      const ref = `${version.name}@${version.version}`;
      const answer = await InputDialog.getText({
        title: `Alias of ${ref}`,
        label: 'An alias moves here from the version holding it; "-alias" removes it from this one.',
        placeholder: 'prod',
        okLabel: 'Apply'
      });
      const alias = answer.value?.trim();
      if (answer.button.accept && alias) {
        await models.setAlias(version.name, version.version, alias).catch(e => notifyError(`Alias ${alias} of ${ref}`, e));
      }
    }
  });

  commands.addCommand(ModelCommandIDs.deploy, {
    label: args => (args.model ? `Deploy ${args.model}@${args.version}…` : 'Deploy a Model Version…'),
    isEnabled: () => hasModels() && clusters.clusters.length > 0,
    execute: async args => {
      const version = await pickVersion(models, args, 'Deploy which version?', v => !v.deployed);
      if (!version) {
        return;
      }
      const ref = `${version.name}@${version.version}`;
      const form = new DeployForm(clusters.clusters.map(c => c.name), clusters.cluster);
      const answer = await showDialog({
        title: `Deploy ${ref}`,
        body: form,
        buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Deploy' })]
      });
      if (!answer.button.accept || !answer.value) {
        return;
      }
      const { cluster, min, max } = answer.value;
      try {
        const endpoint = await models.deploy(version.name, version.version, cluster, min, max);
        Notification.success(`${ref} serves as endpoint ${endpoint.id} on ${cluster}`, { autoClose: 5000 });
      } catch (error) {
        notifyError(`Deploy ${ref}`, error);
      }
    }
  });

  commands.addCommand(ModelCommandIDs.undeploy, {
    label: args => (args.endpoint ? `Undeploy Endpoint ${args.endpoint}…` : 'Undeploy an Endpoint…'),
    isEnabled: () => models.endpoints.length > 0,
    execute: async args => {
      let id = args.endpoint as string | undefined;
      if (!id) {
        const picked = await InputDialog.getItem({
          title: 'Undeploy which endpoint?',
          items: models.endpoints.map(e => `${e.id}: ${e.model} on ${e.cluster}`)
        });
        id = picked.button.accept ? picked.value?.split(':')[0] : undefined;
      }
      const endpoint = models.endpoints.find(e => e.id === id);
      if (!endpoint) {
        return;
      }
      const answer = await showDialog({
        title: `Undeploy endpoint ${endpoint.id}?`,
        body: `${endpoint.model} stops answering: its replicas' jobs on ${endpoint.cluster} are cancelled.`,
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Undeploy' })]
      });
      if (answer.button.accept) {
        await models.undeploy(endpoint).catch(e => notifyError(`Undeploy endpoint ${endpoint.id}`, e));
      }
    }
  });

  for (const command of Object.values(ModelCommandIDs)) {
    palette?.addItem({ command, category: CATEGORY });
  }
}

/** The version `args` names (`model`, `version`), or one the user picks among those `fits`. */
async function pickVersion(
  models: ModelsModel,
  args: Args,
  title: string,
  fits: (v: { deployed: boolean }) => boolean = () => true
): Promise<{ name: string; version: number } | null> {
  if (args.model && args.version) {
    return { name: String(args.model), version: Number(args.version) };
  }
  const items: string[] = [];
  models.models.forEach(m => m.versions.filter(fits).forEach(v => items.push(`${m.name}@${v.version}`)));
  if (items.length === 0) {
    return null;
  }
  const answer = await InputDialog.getItem({ title, items });
  if (!answer.button.accept || !answer.value) {
    return null;
  }
  const at = answer.value.lastIndexOf('@');
  return { name: answer.value.slice(0, at), version: Number(answer.value.slice(at + 1)) };
}

/** Where a deploy's replicas run and how many: a cluster, and min and max replicas. */
class DeployForm extends Widget implements Dialog.IBodyWidget<{ cluster: string; min: number; max: number }> {
  constructor(clusters: string[], chosen: string | null) {
    super();
    this.addClass('jp-gtc-DeployForm');
    const label = (text: string, input: HTMLElement) => {
      const row = document.createElement('label');
      row.textContent = text;
      row.appendChild(input);
      this.node.appendChild(row);
    };
    this._cluster = document.createElement('select');
    this._cluster.setAttribute('aria-label', 'Cluster');
    for (const name of clusters) {
      this._cluster.appendChild(new Option(name, name, false, name === chosen));
    }
    label('Cluster ', this._cluster);
    this._min = number(1);
    this._max = number(1);
    label('Replicas at least ', this._min);
    label('at most ', this._max);
    const note = document.createElement('p');
    note.textContent = 'Its address is served by this Jupyter server, as long as the server runs.';
    this.node.appendChild(note);
  }

  getValue(): { cluster: string; min: number; max: number } {
    const min = Number(this._min.value);
    return { cluster: this._cluster.value, min, max: Math.max(min, Number(this._max.value)) };
  }

  private _cluster: HTMLSelectElement;
  private _min: HTMLInputElement;
  private _max: HTMLInputElement;
}

function number(value: number): HTMLInputElement {
  const input = document.createElement('input');
  input.type = 'number';
  input.min = '1';
  input.value = String(value);
  return input;
}
