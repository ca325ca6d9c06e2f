/**
 * The sidebar's "Studies" section: the chosen cluster's tuning studies, each with its
 * progress and best trial, and, unfolded, a line per trial with its job's log and plot.
 * Stop, resume and stop-a-trial are commands (commands.ts), as every other action is.
 */
import {
  caretDownIcon,
  caretRightIcon,
  LabIcon,
  ReactWidget,
  runIcon,
  stopIcon,
  textEditorIcon,
  ToolbarButtonComponent,
  UseSignal
} from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import React, { useState } from 'react';

import { IStudy, ITrial } from './api';
import { CommandIDs } from './commands';
import { metricsIcon } from './icons';
import { ClustersModel, resumable, STUDY_FINISHED } from './model';
import { CommandButton, StateKind, StateLabel } from './parts';

export class StudiesSection extends ReactWidget {
  constructor(
    private model: ClustersModel,
    private commands: CommandRegistry
  ) {
    super();
    this.addClass('jp-gtc-Section');
    this.title.label = 'Studies';
    model.changed.connect(() => {
      const running = model.studies.filter(s => s.state === 'RUNNING').length;
      this.title.label = running ? `Studies (${running} running)` : 'Studies';
    });
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.model.changed}>
        {() => <StudyList studies={this.model.studies} hasCluster={!!this.model.cluster} commands={this.commands} />}
      </UseSignal>
    );
  }
}

function StudyList(props: { studies: IStudy[]; hasCluster: boolean; commands: CommandRegistry }): JSX.Element {
  if (props.studies.length === 0) {
    return (
      <div className="jp-gtc-Empty">
        {props.hasCluster
          ? 'No tuning studies on this cluster. Start one with %%gtc_tune in a notebook or gtc study create.'
          : 'Studies show here once a cluster exists.'}
      </div>
    );
  }
  return (
    <ul className="jp-gtc-Studies">
      {props.studies.map(study => (
        <StudyItem key={study.name} study={study} commands={props.commands} />
      ))}
    </ul>
  );
}

function StudyItem({ study, commands }: { study: IStudy; commands: CommandRegistry }): JSX.Element {
  const [open, setOpen] = useState(study.state === 'RUNNING');
  const finished = STUDY_FINISHED.has(study.state);
  const done = study.trials.length - (study.counts.RUNNING ?? 0);
  const args = { study: study.name };
  const best = study.best;
  const reason = study.reason ?? (!study.driven && !finished ? 'no process drives it' : null);
  const summary = [
    `${done}/${study.max_trials} trials`,
    study.counts.RUNNING ? `${study.counts.RUNNING} running` : null,
    study.counts.PRUNED ? `${study.counts.PRUNED} stopped early` : null,
    study.counts.FAIL ? `${study.counts.FAIL} failed` : null
  ].filter(Boolean);
  return (
    <li className="jp-gtc-Study" data-study={study.name} title={study.sampler}>
      <div className="jp-gtc-Job-line">
        <ToolbarButtonComponent
          className="jp-gtc-Study-toggle"
          icon={open ? caretDownIcon : caretRightIcon}
          tooltip={open ? 'Hide the trials' : 'Show the trials'}
          onClick={() => setOpen(!open)}
        />
        <span className="jp-gtc-Job-name" title={study.name}>{study.name}</span>
        <StateLabel state={study.state} kind={studyKind(study)} />
        <div className="jp-gtc-Actions">
          {resumable(study) && (
            <CommandButton commands={commands} command={CommandIDs.resumeStudy} args={args} icon={runIcon}
              tooltip="Resume: drive it from this Jupyter server" />
          )}
          {!finished && (
            <CommandButton commands={commands} command={CommandIDs.stopStudy} args={args} icon={stopIcon}
              tooltip="Stop the study" />
          )}
        </div>
      </div>
      {reason && (
        <div className={`jp-gtc-Study-reason${study.state === 'FAILED' ? ' jp-gtc-Failure' : ''}`}>{reason}</div>
      )}
      <div className="jp-gtc-Study-detail">
        <span className="jp-gtc-Study-progress">{summary.join(' · ')}</span>
        {best && (
          <span className="jp-gtc-Study-best">
            best {study.metric} {number(best.value)} (trial {best.trial_id})
          </span>
        )}
      </div>
      {open && <TrialList study={study} commands={commands} />}
    </li>
  );
}

/** One item per trial, in lines like a job's: its id, state, metric (the final one, or the
 * latest report while it runs) and its job's log, plot and stop (on a line of their own
 * where the panel is too narrow); then why it stopped, if it did, whole; then its
 * parameters, which a narrow panel cuts short (the tooltip keeps them). */
function TrialList({ study, commands }: { study: IStudy; commands: CommandRegistry }): JSX.Element {
  if (study.trials.length === 0) {
    return <div className="jp-gtc-Empty">No trial has started yet.</div>;
  }
  const button = (command: string, icon: LabIcon, tooltip: string, args: Record<string, string>) => (
    <CommandButton key={command} commands={commands} command={command} args={args} icon={icon} tooltip={tooltip} />
  );
  return (
    <ul className="jp-gtc-Trials">
      {study.trials.map(t => (
        <li key={t.number} className="jp-gtc-Trial" data-trial={t.trial_id}>
          <div className="jp-gtc-Job-line">
            <span className="jp-gtc-Job-id" title={t.job_id ? `trial ${t.trial_id}, Slurm job ${t.job_id}` : undefined}>
              #{t.trial_id}
            </span>
            <StateLabel state={t.state} kind={trialKind(t)} />
            <span
              className="jp-gtc-Trial-value"
              title={`${study.metric}${t.value === null && t.step !== null ? ` at step ${t.step}` : ''}`}
            >
              {number(t.value ?? t.latest)}
            </span>
            {t.job_id && (
              <div className="jp-gtc-Actions">
                {button(CommandIDs.openLog, textEditorIcon, `Open the log of job ${t.job_id}`,
                  { cluster: study.cluster, id: t.job_id })}
                {button(CommandIDs.openMetrics, metricsIcon, `Plot the metrics of job ${t.job_id}`,
                  { cluster: study.cluster, id: t.job_id })}
                {t.state === 'RUNNING' &&
                  button(CommandIDs.stopTrial, stopIcon, 'Stop this trial', { study: study.name, trial: t.trial_id })}
              </div>
            )}
          </div>
          {t.reason && (
            <div className={`jp-gtc-Trial-reason${t.state === 'FAIL' ? ' jp-gtc-Failure' : ''}`}>{t.reason}</div>
          )}
          <div className="jp-gtc-Trial-params" title={params(t)}>
            {params(t)}
          </div>
        </li>
      ))}
    </ul>
  );
}

function studyKind(study: IStudy): StateKind {
  if (study.state === 'SUCCEEDED') {
    return 'good';
  }
  if (study.state === 'FAILED') {
    return 'bad';
  }
  return study.state === 'RUNNING' && study.driven ? 'active' : 'waiting';
}

function trialKind(trial: ITrial): StateKind {
  return trial.state === 'COMPLETE' ? 'good' : trial.state === 'RUNNING' ? 'active' : trial.state === 'FAIL' ? 'bad' : 'waiting';
}

function params(trial: ITrial): string {
  return Object.entries(trial.params)
    .map(([name, value]) => `${name}=${typeof value === 'number' ? number(value) : value}`)
    .join(', ');
}

/** A metric or parameter in four significant digits; "–" for none (or NaN, sent as null). */
function number(value: number | null): string {
  if (value === null) {
    return '–';
  }
  return Number.isInteger(value) ? String(value) : Number(value.toPrecision(4)).toString();
}
