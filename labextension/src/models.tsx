/**
 * The sidebar's "Models" section: the model registry's models, each version with its aliases
 * and, unfolded, its lineage (the job that trained it, whose name opens its log; its final
 * metrics, its study trial, its parent); then the deployed endpoints with their replicas,
 * request rate and latency. Alias, deploy and undeploy are commands (modelcommands.ts).
 * It reads `ModelsModel` (modelsmodel.ts), which asks the server while the section is shown.
 */
import { ServerConnection } from '@jupyterlab/services';
import {
  caretDownIcon,
  caretRightIcon,
  editIcon,
  LabIcon,
  ReactWidget,
  runIcon,
  stopIcon,
  textEditorIcon,
  ToolbarButtonComponent,
  UseSignal
} from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import { Message } from '@lumino/messaging';
import { AccordionPanel } from '@lumino/widgets';
import React, { useState } from 'react';

import { IEndpoint, IModelSummary, IModelVersion, IModelVersionSummary } from './api';
import { CommandIDs } from './commands';
import { metricsIcon } from './icons';
import { ModelCommandIDs } from './modelcommands';
import { ModelsModel } from './modelsmodel';
import { CommandButton, StateLabel } from './parts';

export class ModelsSection extends ReactWidget {
  constructor(
    private models: ModelsModel,
    private commands: CommandRegistry
  ) {
    super();
    this.addClass('jp-gtc-Section');
    this.id = 'jupyter-gtc-models';
    this.title.label = 'Models';
    models.shown = () => this.isVisible && !document.hidden; // a background tab asks nothing
    models.changed.connect(() => {
      const n = models.endpoints.length;
      this.title.label = n ? `Models (${n} deployed)` : 'Models';
    });
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.models.refresh(); // unfolded, or the sidebar opened: now, not at the next poll
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.models.changed}>
        {() => <ModelList models={this.models} commands={this.commands} />}
      </UseSignal>
    );
  }
}

/**
 * The section starts folded, unless the user left it open (remembered in the browser, per
 * server): open, it takes its share of the height from the cluster card and the jobs list,
 * which a user of the sidebar without models would lose for an empty list.
 */
export function keepModelsFolded(accordion: AccordionPanel, section: ModelsSection): void {
  const key = `jupyter-gtc:models-open:${ServerConnection.makeSettings().baseUrl}`;
  let open = false;
  try {
    open = window.localStorage.getItem(key) === 'true';
  } catch {
    // storage disabled: folded
  }
  if (!open) {
    accordion.collapse(accordion.widgets.indexOf(section));
  }
  accordion.expansionToggled.connect((_, index) => {
    if (accordion.widgets[index] === section) {
      try {
        window.localStorage.setItem(key, String(!section.isHidden));
      } catch {
        // storage disabled or full: the choice lasts this page only
      }
    }
  });
}

function ModelList({ models, commands }: { models: ModelsModel; commands: CommandRegistry }): JSX.Element {
  if (!models.loaded) {
    return <div className="jp-gtc-Empty">{models.warning ?? 'Loading…'}</div>;
  }
  return (
    <div className="jp-gtc-ModelList">
      {models.warning && <div className="jp-gtc-Problem">{models.warning}</div>}
      {models.models.length === 0 ? (
        <div className="jp-gtc-Empty">
          No models registered. Register a finished job’s model with <code>%gtc_register JOB --model NAME</code>{' '}
          in a notebook, or <code>gtc model register</code>.
        </div>
      ) : (
        <ul className="jp-gtc-Models">
          {models.models.map(m => (
            <ModelItem key={m.name} model={m} models={models} commands={commands} />
          ))}
        </ul>
      )}
      {models.endpoints.length > 0 && (
        <>
          <div className="jp-gtc-Subheading">Endpoints</div>
          <ul className="jp-gtc-Endpoints">
            {models.endpoints.map(e => (
              <EndpointItem key={e.id} endpoint={e} commands={commands} />
            ))}
          </ul>
        </>
      )}
    </div>
  );
}

/** A model: its name and version count; its versions, newest first, each with its aliases and
 * actions; unfolded, each version's lineage. */
function ModelItem(props: { model: IModelSummary; models: ModelsModel; commands: CommandRegistry }): JSX.Element {
  const { model, models, commands } = props;
  const [open, setOpen] = useState(false);
  const detail = open ? models.detail(model.name) : null;
  const toggle = () => {
    models.unfold(model.name, !open);
    setOpen(!open);
  };
  const versions = [...model.versions].reverse();
  return (
    <li className="jp-gtc-Model" data-model={model.name} title={model.description || undefined}>
      <div className="jp-gtc-Job-line">
        <ToolbarButtonComponent
          className="jp-gtc-Model-toggle"
          icon={open ? caretDownIcon : caretRightIcon}
          tooltip={open ? 'Hide the lineage' : 'Show the lineage: what trained each version'}
          onClick={toggle}
        />
        <span className="jp-gtc-Job-name jp-gtc-Model-name" title={model.name}>{model.name}</span>
        <span className="jp-gtc-Model-count">
          {model.versions.length} version{model.versions.length === 1 ? '' : 's'}
        </span>
      </div>
      <ul className="jp-gtc-ModelVersions">
        {versions.map(v => (
          <VersionItem
            key={v.version}
            name={model.name}
            version={v}
            detail={detail?.versions.find(d => d.version === v.version) ?? null}
            open={open}
            deploying={models.deploying.has(`${model.name}@${v.version}`)}
            endpoint={models.endpoints.find(e => e.model === `${model.name}@${v.version}`) ?? null}
            commands={commands}
          />
        ))}
      </ul>
    </li>
  );
}

function VersionItem(props: {
  name: string;
  version: IModelVersionSummary;
  detail: IModelVersion | null;
  open: boolean;
  deploying: boolean;
  endpoint: IEndpoint | null;
  commands: CommandRegistry;
}): JSX.Element {
  const { name, version: v, commands, endpoint } = props;
  const args = { model: name, version: v.version };
  const button = (command: string, icon: LabIcon, tooltip: string, a: ReadonlyPartialJSONObject = args) => (
    <CommandButton key={command} commands={commands} command={command} args={a} icon={icon} tooltip={tooltip} />
  );
  return (
    <li className="jp-gtc-ModelVersion" data-version={v.version} title={v.artifact_uri}>
      <div className="jp-gtc-Job-line">
        <span className="jp-gtc-Job-id">v{v.version}</span>
        <span className="jp-gtc-Aliases">
          {v.aliases.map(a => (
            <span key={a} className="jp-gtc-Chip jp-gtc-Alias" data-alias={a}>{a}</span>
          ))}
        </span>
        {props.deploying && <StateLabel state="DEPLOYING" kind="waiting" />}
        {v.deployed && endpoint && (
          <span className="jp-gtc-Chip jp-gtc-Version-endpoint" title={`endpoint ${endpoint.id}: ${endpoint.url}`}>
            deployed
          </span>
        )}
        <div className="jp-gtc-Actions">
          {button(ModelCommandIDs.setAlias, editIcon, 'Set an alias: move one here, or "-alias" to remove it')}
          {!v.deployed && !props.deploying && button(ModelCommandIDs.deploy, runIcon, 'Deploy: serve it as an endpoint')}
          {v.deployed && endpoint &&
            button(ModelCommandIDs.undeploy, stopIcon, `Undeploy endpoint ${endpoint.id}`, { endpoint: endpoint.id })}
        </div>
      </div>
      {props.open && <Lineage detail={props.detail} commands={commands} />}
    </li>
  );
}

/** What trained a version: its job (the name opens the job's log; the button its metrics),
 * its final metrics, its study trial and parameters, the version it started from. */
function Lineage({ detail, commands }: { detail: IModelVersion | null; commands: CommandRegistry }): JSX.Element {
  if (!detail) {
    return <div className="jp-gtc-Lineage jp-gtc-Lineage-loading">Loading the lineage…</div>;
  }
  const { job, metrics, trial, parent, checkpoint } = detail.lineage;
  const open = (command: string) => job && void commands.execute(command, { cluster: job.cluster, id: job.id });
  const scalars = Object.entries(metrics ?? {}).map(([tag, s]) => `${tag} ${number(s.value)}`);
  return (
    <div className="jp-gtc-Lineage">
      {job ? (
        <div className="jp-gtc-Lineage-line">
          <span>trained by</span>
          <button
            className="jp-gtc-Lineage-job"
            title={`Open the log of job ${job.id} (${job.name}) on ${job.cluster}: ${job.job_dir}`}
            onClick={() => open(CommandIDs.openLog)}
          >
            {job.name} {job.id}
          </button>
          <div className="jp-gtc-Actions">
            <ToolbarButtonComponent icon={textEditorIcon} tooltip={`Open the log of job ${job.id}`}
              dataset={{ command: CommandIDs.openLog }} onClick={() => open(CommandIDs.openLog)} />
            <ToolbarButtonComponent icon={metricsIcon} tooltip={`Plot the metrics of job ${job.id}`}
              dataset={{ command: CommandIDs.openMetrics }} onClick={() => open(CommandIDs.openMetrics)} />
          </div>
        </div>
      ) : (
        <div className="jp-gtc-Lineage-line" title={detail.lineage.source}>registered from a folder</div>
      )}
      {scalars.length > 0 && (
        <div className="jp-gtc-Lineage-metrics" title={scalars.join(', ')}>{scalars.join(' · ')}</div>
      )}
      {trial && (
        <div className="jp-gtc-Lineage-trial" title={params(trial.params)}>
          trial {trial.trial_id} of {trial.study}: {params(trial.params)}
        </div>
      )}
      {parent && <div className="jp-gtc-Lineage-parent">from {parent}</div>}
      {checkpoint && <div className="jp-gtc-Lineage-checkpoint" title={checkpoint}>checkpoint {basename(checkpoint)}</div>}
    </div>
  );
}

/** An endpoint: its model and cluster, its replicas (ready of running, within min–max), and
 * its last minute's requests/s, p50/p95 latency and errors. */
function EndpointItem({ endpoint: e, commands }: { endpoint: IEndpoint; commands: CommandRegistry }): JSX.Element {
  const ready = e.replicas.filter(r => r.healthy).length;
  const known = e.replicas.some(r => r.healthy !== undefined); // health is known where this server serves it
  const t = e.traffic;
  const traffic = [
    `${t.rate.toFixed(t.rate < 10 ? 2 : 1)} req/s`,
    `p50 ${ms(t.p50)}`,
    `p95 ${ms(t.p95)}`,
    `${t.errors} error${t.errors === 1 ? '' : 's'}`
  ].join(' · ');
  return (
    <li className="jp-gtc-Endpoint" data-endpoint={e.id} title={`endpoint ${e.id}: ${e.url}`}>
      <div className="jp-gtc-Job-line">
        <span className="jp-gtc-Job-name jp-gtc-Endpoint-model" title={e.model}>{e.model}</span>
        {known && <StateLabel state={ready ? 'READY' : 'STARTING'} kind={ready ? 'good' : 'waiting'} />}
        <div className="jp-gtc-Actions">
          <CommandButton commands={commands} command={ModelCommandIDs.undeploy} args={{ endpoint: e.id }} icon={stopIcon}
            tooltip={`Undeploy endpoint ${e.id}`} />
        </div>
      </div>
      <div className="jp-gtc-Endpoint-detail">
        <span className="jp-gtc-Chip" title={`on cluster ${e.cluster}`}>{e.cluster}</span>
        <span className="jp-gtc-Endpoint-id" title={`endpoint ${e.id}`}>{e.id}</span>
        <span
          className="jp-gtc-Endpoint-replicas"
          title={`replicas' jobs: ${e.replicas.map(r => r.job).join(', ')}; scales between ${e.min_replicas} and ${e.max_replicas}`}
        >
          {known ? `${ready}/${e.replicas.length}` : e.replicas.length} replica{e.replicas.length === 1 ? '' : 's'}
          {known ? ' ready' : ''} ({e.min_replicas}–{e.max_replicas})
        </span>
        <span className="jp-gtc-Endpoint-traffic" title={`the last ${t.window} s: ${t.requests} requests`}>
          {traffic}
        </span>
      </div>
    </li>
  );
}

function ms(seconds: number | null): string {
  return seconds === null ? '–' : `${Math.round(seconds * 1000)} ms`;
}

function params(p: Record<string, string | number | boolean>): string {
  return Object.entries(p)
    .map(([k, v]) => `${k}=${typeof v === 'number' ? number(v) : v}`)
    .join(', ');
}

function number(value: number | null): string {
  if (value === null) {
    return '–';
  }
  return Number.isInteger(value) ? String(value) : Number(value.toPrecision(4)).toString();
}

function basename(path: string): string {
  return path.split('/').filter(Boolean).pop() ?? path;
}
