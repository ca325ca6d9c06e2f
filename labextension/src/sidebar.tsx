/**
 * The "Training Clusters" side panel: a JupyterLab `SidePanel` whose collapsible sections
 * (Clusters, Jobs, and Studies from studies.tsx) render from one `ClustersModel`, and Models
 * (models.tsx) from its `ModelsModel`; they share its height by their content (fit.ts), each
 * scrolling on its own. Buttons run commands (commands.ts), so each
 * action is also in the command palette.
 *
 * Everything fits the default width (about 250 px): a line that cannot hold its parts wraps
 * them, actions never shrink or leave the panel, and a text cut short keeps its whole in a
 * tooltip.
 */
import {
  addIcon,
  Button,
  closeIcon,
  deleteIcon,
  editIcon,
  HTMLSelect,
  LabIcon,
  pauseIcon,
  ReactWidget,
  redoIcon,
  refreshIcon,
  runIcon,
  SidePanel,
  stopIcon,
  textEditorIcon,
  Toolbar,
  ToolbarButton,
  ToolbarButtonComponent,
  UseSignal
} from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { AccordionPanel, Panel } from '@lumino/widgets';
import React, { useState } from 'react';

import { ICluster, IClusterEvent, IJob, INode, IOperation } from './api';
import { CommandIDs } from './commands';
import { clusterIcon, metricsIcon } from './icons';
import { ClustersModel } from './model';
import { SectionFit } from './fit';
import { CommandButton, duration, StateKind, StateLabel, useClock } from './parts';
import { keepModelsFolded, ModelsSection } from './models';
import { ModelsModel } from './modelsmodel';
import { StudiesSection } from './studies';

export function createSidebar(
  model: ClustersModel,
  commands: CommandRegistry,
  models: ModelsModel
): SidePanel {
  const header = new Panel();
  header.addWidget(
    ReactWidget.create(
      <UseSignal signal={model.changed}>
        {() => <SidebarHeader model={model} />}
      </UseSignal>
    )
  );
  const panel = new SidePanel({ header });
  panel.id = 'jupyter-gtc-sidebar';
  panel.title.icon = clusterIcon;
  panel.title.caption = 'Training Clusters';
  panel.addClass('jp-gtc-Sidebar');
  panel.addWidget(new ClustersSection(model, commands));
  panel.addWidget(new JobsSection(model, commands));
  panel.addWidget(new StudiesSection(model, commands));
  const modelsSection = new ModelsSection(models, commands);
  panel.addWidget(modelsSection);
  keepModelsFolded(panel.content as AccordionPanel, modelsSection);
  const fit = new SectionFit(panel.content as AccordionPanel);
  panel.disposed.connect(() => fit.dispose());
  return panel;
}

function SidebarHeader({ model }: { model: ClustersModel }): JSX.Element {
  const problem =
    model.status === 'reconnecting'
      ? 'Reconnecting to the Jupyter server…'
      : model.warning;
  return (
    <div className="jp-gtc-Header">
      <h2>Training Clusters</h2>
      {problem && <div className="jp-gtc-Header-problem">{problem}</div>}
    </div>
  );
}

// -- clusters ---------------------------------------------------------------------------

class ClustersSection extends ReactWidget {
  constructor(
    private model: ClustersModel,
    private commands: CommandRegistry
  ) {
    super();
    this.addClass('jp-gtc-Section');
    this.title.label = 'Clusters';
    this.toolbar = new Toolbar();
    this.toolbar.addItem(
      'create',
      new ToolbarButton({
        icon: addIcon,
        tooltip: 'Create a cluster from a spec file',
        dataset: { command: CommandIDs.createCluster },
        onClick: () => void commands.execute(CommandIDs.createCluster)
      })
    );
    this.toolbar.addItem(
      'refresh',
      new ToolbarButton({
        icon: refreshIcon,
        tooltip: 'Refresh',
        dataset: { command: CommandIDs.refresh },
        onClick: () => void commands.execute(CommandIDs.refresh)
      })
    );
  }

  readonly toolbar: Toolbar;

  render(): JSX.Element {
    return (
      <UseSignal signal={this.model.changed}>
        {() => <ClusterList model={this.model} commands={this.commands} />}
      </UseSignal>
    );
  }
}

function ClusterList(props: {
  model: ClustersModel;
  commands: CommandRegistry;
}): JSX.Element {
  const { model } = props;
  if (!model.loaded) {
    return <div className="jp-gtc-Empty">Loading…</div>;
  }
  const stray = model.strayOperations.map(op => (
    <div key={op.id} className="jp-gtc-Cluster jp-gtc-Cluster-stray" data-cluster={op.cluster}>
      <div className="jp-gtc-Cluster-header">
        <div className="jp-gtc-Cluster-title">
          <span className="jp-gtc-Cluster-name">{op.cluster}</span>
        </div>
      </div>
      <OperationLine operation={op} onDismiss={() => model.dismiss(op.id)} />
    </div>
  ));
  if (model.clusters.length === 0) {
    return (
      <div className="jp-gtc-ClusterList">
        {stray}
        {stray.length === 0 && (
          <div className="jp-gtc-Empty">
            No clusters yet. Create one with the + button, <code>%%gtc_cluster</code>{' '}
            in a notebook, or <code>gtc cluster create -f SPEC</code>.
          </div>
        )}
      </div>
    );
  }
  return (
    <div className="jp-gtc-ClusterList">
      {model.clusters.map(cluster => (
        <ClusterCard
          key={cluster.name}
          cluster={cluster}
          selected={cluster.name === model.cluster}
          onSelect={() => model.selectCluster(cluster.name)}
          operation={model.operationOf(cluster.name)}
          events={model.eventsOf(cluster.name)}
          onDismiss={id => model.dismiss(id)}
          commands={props.commands}
        />
      ))}
      {stray}
    </div>
  );
}

const VERBS: Record<IOperation['action'], string> = { create: 'Creating', scale: 'Scaling', delete: 'Deleting' };

/** A create, scale or delete of a cluster: "Creating… starting slurmd 2/3" while it runs,
 * why it failed (until dismissed) once it has. */
function OperationLine(props: { operation: IOperation; onDismiss: () => void }): JSX.Element {
  const op = props.operation;
  const verb = VERBS[op.action] ?? op.action;
  if (op.state === 'RUNNING') {
    return (
      <div className="jp-gtc-Operation" data-state={op.state} data-action={op.action} role="status">
        <span className="jp-gtc-Spinner" aria-hidden="true" />
        <span className="jp-gtc-Operation-verb">{verb}…</span>{' '}
        {op.message && <span className="jp-gtc-Operation-message">{op.message}</span>}
      </div>
    );
  }
  return (
    <div className="jp-gtc-Operation jp-gtc-Operation-failed" data-state={op.state} data-action={op.action}>
      <span className="jp-gtc-Operation-message">
        {`${verb} failed: ${op.error?.message ?? 'no reason given'}`}
      </span>
      <ToolbarButtonComponent
        icon={closeIcon}
        tooltip="Dismiss"
        onClick={() => props.onDismiss()}
      />
    </div>
  );
}

function ClusterCard(props: {
  cluster: ICluster;
  selected: boolean;
  onSelect: () => void;
  operation: IOperation | null;
  /** Its remediation history, oldest first. */
  events: IClusterEvent[];
  onDismiss: (operationId: string) => void;
  commands: CommandRegistry;
}): JSX.Element {
  const { cluster, commands, operation } = props;
  const busy = operation?.state === 'RUNNING';
  const nodes = cluster.nodes ?? [];
  const args = { cluster: cluster.name };
  const used = allocation(cluster);
  return (
    <div
      className={`jp-gtc-Cluster${props.selected ? ' jp-mod-selected' : ''}`}
      data-cluster={cluster.name}
      onClick={props.onSelect}
    >
      <div className="jp-gtc-Cluster-header">
        <div className="jp-gtc-Cluster-title">
          <span className="jp-gtc-Cluster-name">{cluster.name}</span>
          <span className="jp-gtc-Chip">{cluster.backend}</span>
          <StateLabel state={cluster.state} kind={clusterKind(cluster.state)} />
        </div>
        <div className="jp-gtc-Actions">
          {!cluster.attached && (
            <CommandButton commands={commands} command={CommandIDs.scalePool} args={args} icon={editIcon}
              tooltip="Scale a pool" enabled={!busy} />
          )}
          <CommandButton commands={commands} command={CommandIDs.deleteCluster} args={args} icon={deleteIcon}
            tooltip={cluster.attached ? 'Detach this cluster' : 'Delete this cluster'} enabled={!busy} />
        </div>
      </div>
      {operation && <OperationLine operation={operation} onDismiss={() => props.onDismiss(operation.id)} />}
      <div className="jp-gtc-Cluster-detail">
        {used && <span className={used.className}>{used.text}</span>}
        {clusterDetail(cluster).map((part, i) => (
          <span key={i}>{part}</span>
        ))}
      </div>
      {cluster.problem && (
        <div className="jp-gtc-Problem">{cluster.problem}</div>
      )}
      {nodes.length > 0 && <NodeTable nodes={nodes} />}
      {props.events.length > 0 && <History events={props.events} />}
    </div>
  );
}

/** What a card says of a cluster's make-up: its pools (one jupyter_gtc created), or where it
 * is reached and the Slurm it runs (an attached one); then its partitions. */
function clusterDetail(cluster: ICluster): string[] {
  const partitions = `partitions: ${cluster.partitions.map(p => p.name).join(', ') || '-'}`;
  if (cluster.attached) {
    const details = cluster.details ?? {};
    return [
      `login: ${details.login ?? '…'}`,
      ...(details.slurm_version ? [`Slurm ${details.slurm_version}`] : []),
      partitions
    ];
  }
  const slurm = cluster.spec.orchestrator_spec.slurm_spec;
  const pools = cluster.spec.node_pools.map(p =>
    p.id === slurm.login_node_pool_id
      ? `login: ${p.machine_spec.machine_type}`
      : `${p.id}: ${p.scaling_spec.min_node_count} × ${p.machine_spec.machine_type}`
  );
  return [...pools, partitions];
}

/** "8/24 GPUs allocated"; for a cluster without GPUs its CPUs instead, once its nodes are
 * known; nothing before then. */
function allocation(cluster: ICluster): { className: string; text: string } | null {
  const nodes = cluster.nodes ?? [];
  const gpus = nodes.length ? sum(nodes, n => n.gpus) : cluster.gpu_count;
  if (gpus > 0) {
    return { className: 'jp-gtc-Cluster-gpus', text: `${sum(nodes, n => n.gpus_allocated)}/${gpus} GPUs allocated` };
  }
  if (nodes.length) {
    const cpus = `${sum(nodes, n => n.cpus_allocated)}/${sum(nodes, n => n.cpus)} CPUs allocated`;
    return { className: 'jp-gtc-Cluster-cpus', text: cpus };
  }
  return null;
}

function sum<T>(items: T[], value: (item: T) => number): number {
  return items.reduce((total, item) => total + value(item), 0);
}

/** Nodes in a table narrow enough for the sidebar (no GPU column where no node has one),
 * scrolling sideways on its own if names are long; a drain or down reason under its node. */
function NodeTable({ nodes }: { nodes: INode[] }): JSX.Element {
  const gpus = nodes.some(n => n.gpus > 0);
  const columns = gpus ? 5 : 4;
  return (
    <div className="jp-gtc-NodeTable-scroll">
      <table className="jp-gtc-Table jp-gtc-NodeTable">
        <thead>
          <tr>
            <th>Node</th>
            <th>State</th>
            {gpus && <th title="GPUs allocated / total">GPUs</th>}
            <th title="CPUs allocated / total">CPUs</th>
            <th title="Memory allocated / total, GB">Mem GB</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map(n => (
            <React.Fragment key={n.name}>
              <tr data-node={n.name}>
                <td>{n.name}</td>
                <td className="jp-gtc-Node-state">
                  <StateLabel state={[n.state, ...n.flags].join('+')} kind={nodeKind(n)} />
                </td>
                {gpus && <td>{`${n.gpus_allocated}/${n.gpus}`}</td>}
                <td>{`${n.cpus_allocated}/${n.cpus}`}</td>
                <td>{`${gigabytes(n.memory_allocated_mb)}/${gigabytes(n.memory_mb)}`}</td>
              </tr>
              {n.reason && (
                <tr className="jp-gtc-Node-reason">
                  <td colSpan={columns}>{n.reason}</td>
                </tr>
              )}
            </React.Fragment>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const HISTORY_SHOWN = 50; // the newest events listed; the count says how many there are

/** What the cluster's supervisor noticed and did to its nodes, newest first, folded under
 * "History (N)" until opened (the browser keeps it open across updates). */
function History({ events }: { events: IClusterEvent[] }): JSX.Element {
  const shown = events.slice(-HISTORY_SHOWN).reverse();
  return (
    <details className="jp-gtc-History" onClick={event => event.stopPropagation()}>
      <summary title="What the cluster's supervisor noticed and did to its nodes">
        History ({events.length})
      </summary>
      <div className="jp-gtc-NodeTable-scroll">
        <table className="jp-gtc-Table jp-gtc-History-table">
          <thead>
            <tr>
              <th>Time</th>
              <th>Node</th>
              <th>Event</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((e, i) => (
              <React.Fragment key={`${e.time}-${e.node}-${e.event}-${i}`}>
                <tr className="jp-gtc-History-event" data-event-node={e.node} data-event={e.event}>
                  <td title={new Date(e.time * 1000).toLocaleString()}>{clockTime(e.time)}</td>
                  <td>{e.node}</td>
                  <td className="jp-gtc-History-name">{e.event}</td>
                </tr>
                {e.detail && (
                  <tr className="jp-gtc-History-detail">
                    <td colSpan={3}>{e.detail}</td>
                  </tr>
                )}
              </React.Fragment>
            ))}
          </tbody>
        </table>
      </div>
      {events.length > shown.length && (
        <div className="jp-gtc-History-more">{`and ${events.length - shown.length} older`}</div>
      )}
    </details>
  );
}

/** HH:MM:SS in the browser's time zone. */
function clockTime(seconds: number): string {
  const d = new Date(seconds * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map(n => String(n).padStart(2, '0')).join(':');
}

// -- jobs -------------------------------------------------------------------------------

class JobsSection extends ReactWidget {
  constructor(
    private model: ClustersModel,
    private commands: CommandRegistry
  ) {
    super();
    this.addClass('jp-gtc-Section');
    this.title.label = 'Jobs';
    model.changed.connect(() => {
      this.title.label = model.cluster ? `Jobs on ${model.cluster}` : 'Jobs';
    });
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.model.changed}>
        {() => <JobList model={this.model} commands={this.commands} />}
      </UseSignal>
    );
  }
}

const ALL = '';
const PAGE = 100; // jobs rendered at first, and added by "Show more": a long history stays fast

function JobList(props: {
  model: ClustersModel;
  commands: CommandRegistry;
}): JSX.Element {
  const { model, commands } = props;
  const [filter, setFilter] = useState(ALL);
  const [limit, setLimit] = useState(PAGE);
  useClock(model.jobs.some(j => j.state === 'RUNNING')); // elapsed times count on
  if (!model.cluster) {
    return <div className="jp-gtc-Empty">Jobs show here once a cluster exists.</div>;
  }
  const counts = new Map<string, number>();
  model.jobs.forEach(j => counts.set(j.state, (counts.get(j.state) ?? 0) + 1));
  const shown = filter === ALL ? model.jobs : model.jobs.filter(j => j.state === filter);
  const options = [
    { label: `All states (${model.jobs.length})`, value: ALL },
    ...[...counts].map(([state, n]) => ({ label: `${state} (${n})`, value: state }))
  ];
  if (filter !== ALL && !counts.has(filter)) {
    options.push({ label: `${filter} (0)`, value: filter });
  }
  return (
    <div className="jp-gtc-JobList">
      <div className="jp-gtc-JobList-filter">
        <HTMLSelect
          aria-label="Filter jobs by state"
          value={filter}
          options={options}
          onChange={event => {
            setFilter(event.currentTarget.value);
            setLimit(PAGE);
          }}
        />
      </div>
      <ul className="jp-gtc-Jobs">
        {shown.slice(0, limit).map(job => (
          <JobItem key={job.id} job={job} elapsed={duration(model.elapsed(job))} commands={commands} />
        ))}
      </ul>
      {shown.length > limit && (
        <Button className="jp-gtc-More" minimal small onClick={() => setLimit(limit + PAGE)}>
          Show {Math.min(PAGE, shown.length - limit)} more of {shown.length - limit} older jobs
        </Button>
      )}
      {shown.length === 0 && (
        <div className="jp-gtc-Empty">
          {model.jobs.length === 0
            ? 'No jobs on this cluster yet. Submit one with %%sbatch in a notebook or gtc job submit.'
            : 'No jobs in this state.'}
        </div>
      )}
    </div>
  );
}

/** One job in two lines: name, id, user (and "external" for a job jupyter_gtc did not submit)
 * and elapsed; then its state, reason and nodes, which wrap beside its actions rather than
 * being cut; a failed job's line that says why (its log's first error) under them. Memoized: a clock tick re-renders only the running jobs, whose elapsed time
 * changed. */
const JobItem = React.memo(function JobItem(props: {
  job: IJob;
  elapsed: string;
  commands: CommandRegistry;
}): JSX.Element {
  const { job } = props;
  return (
    <li
      className={`jp-gtc-Job${job.managed ? '' : ' jp-gtc-Job-external'}`}
      data-job={job.id}
      data-managed={String(job.managed)}
      title={job.job_dir ?? job.log_path ?? undefined}
    >
      <div className="jp-gtc-Job-line">
        <span className="jp-gtc-Job-name" title={job.name}>{job.name}</span>
        <span className="jp-gtc-Job-id">{job.id}</span>
        {job.user && (
          <span className="jp-gtc-Job-user" title={`Slurm user ${job.user}`}>
            {job.user}
          </span>
        )}
        {!job.managed && (
          <span
            className="jp-gtc-Chip jp-gtc-Job-origin"
            title="Not submitted through jupyter_gtc (a terminal's sbatch, another user): no metrics"
          >
            external
          </span>
        )}
        <span className="jp-gtc-Job-elapsed" title="Elapsed">
          {props.elapsed}
        </span>
      </div>
      <div className="jp-gtc-Job-line">
        <div className="jp-gtc-Job-status">
          <StateLabel state={job.state} kind={jobKind(job)} detail={jobDetail(job)} />
          {job.nodes && (
            <span className="jp-gtc-Job-nodes" title={`nodes ${job.nodes}`}>
              {job.nodes}
            </span>
          )}
          {job.attempts > 1 && (
            <span
              className="jp-gtc-Chip jp-gtc-Job-attempts"
              title={`Requeued ${job.attempts - 1} time(s): a node failed, it hung or it was requeued; the log keeps every attempt`}
            >
              attempt {job.attempts}
            </span>
          )}
        </div>
        <JobActions job={job} commands={props.commands} />
      </div>
      {job.failure && (
        <div className="jp-gtc-Failure jp-gtc-Job-failure" title={job.failure}>
          {failureCause(job.failure)}
        </div>
      )}
    </li>
  );
});

function JobActions({ job, commands }: { job: IJob; commands: CommandRegistry }): JSX.Element {
  const args = { cluster: job.cluster, id: job.id };
  const finished = job.finished;
  const held = (job.reason ?? '').startsWith('JobHeld');
  const button = (command: string, icon: LabIcon, tooltip: string) => (
    <CommandButton key={command} commands={commands} command={command} args={args} icon={icon} tooltip={tooltip} />
  );
  return (
    <div className="jp-gtc-Actions">
      {(job.managed || job.log_path) && button(CommandIDs.openLog, textEditorIcon, 'Open the log')}
      {job.managed && button(CommandIDs.openMetrics, metricsIcon, 'Plot its metrics')}
      {!finished && button(CommandIDs.cancelJob, stopIcon, 'Cancel (scancel)')}
      {job.state === 'PENDING' && !held && button(CommandIDs.holdJob, pauseIcon, 'Hold: keep it from starting')}
      {held && button(CommandIDs.releaseJob, runIcon, 'Release: let it start')}
      {job.state !== 'PENDING' && button(CommandIDs.requeueJob, redoIcon, 'Requeue: run it again')}
    </div>
  );
}

/** A failure line without the state and exit code the line above shows: "FAILED (exit code
 * 1): ModuleNotFoundError: ..." -> "ModuleNotFoundError: ..."; "...; its log does not exist: P"
 * -> "its log does not exist: P". */
function failureCause(failure: string): string {
  return failure.replace(/^[A-Z_]+(?: \([^)]*\))?(?:: |; )/, '');
}

function jobDetail(job: IJob): string | undefined {
  if (job.exit_code !== null && job.exit_code !== 0) {
    return `exit code ${job.exit_code}`;
  }
  return job.state === 'PENDING' && job.reason ? job.reason : undefined;
}

// -- kinds of states ----------------------------------------------------------------

function clusterKind(state: string): StateKind {
  return state === 'RUNNING' ? 'good' : state === 'ERROR' ? 'bad' : 'waiting';
}

function nodeKind(node: INode): StateKind {
  return !node.ready ? 'bad' : node.state === 'IDLE' ? 'good' : 'active';
}

function jobKind(job: IJob): StateKind {
  const state = job.state;
  if (state === 'COMPLETED') {
    return 'good';
  }
  if (state === 'RUNNING' || state === 'COMPLETING' || state === 'CONFIGURING') {
    return 'active';
  }
  return job.finished ? 'bad' : 'waiting';
}

function gigabytes(mb: number): string {
  return String(Math.round(mb / 1024));
}
