/**
 * Small parts the sidebar's sections share: a button that runs a command, a state in its
 * theme colour, a clock that re-renders while something runs, and durations as h:mm:ss.
 */
import { LabIcon, ToolbarButtonComponent } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';
import React, { useEffect, useState } from 'react';

/** A toolbar button that runs `command` with `args`; `data-command` names it. */
export function CommandButton(props: {
  commands: CommandRegistry;
  command: string;
  args: ReadonlyPartialJSONObject;
  icon: LabIcon;
  tooltip: string;
  enabled?: boolean;
}): JSX.Element {
  const { commands, command, args } = props;
  return (
    <ToolbarButtonComponent
      icon={props.icon}
      tooltip={props.tooltip}
      enabled={props.enabled ?? true}
      dataset={{ command }}
      onClick={() => void commands.execute(command, args)}
    />
  );
}

export type StateKind = 'good' | 'active' | 'waiting' | 'bad';

/** A state in the colour of its kind (theme colours: success, brand, warn, error). A
 * compound state (a node's IDLE+DRAIN) may break after each "+"; the tooltip holds the
 * state and its detail whole. */
export function StateLabel(props: { state: string; kind: StateKind; detail?: string }): JSX.Element {
  const parts = props.state.split('+');
  return (
    <span
      className={`jp-gtc-State jp-gtc-State-${props.kind}`}
      data-state={props.state}
      title={props.detail ? `${props.state} · ${props.detail}` : undefined}
    >
      {parts.map((part, i) => (
        <React.Fragment key={i}>
          {i > 0 && <>+<wbr /></>}
          {part}
        </React.Fragment>
      ))}
      {props.detail && <span className="jp-gtc-State-detail"> · {props.detail}</span>}
    </span>
  );
}

/** Render once a second while `running`. */
export function useClock(running: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!running) {
      return;
    }
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [running]);
  return now;
}

export function duration(seconds: number | null): string {
  if (seconds === null) {
    return '–';
  }
  const s = Math.floor(seconds);
  const hms = [Math.floor(s / 3600), Math.floor(s / 60) % 60, s % 60];
  return hms[0] > 0
    ? `${hms[0]}:${pad(hms[1])}:${pad(hms[2])}`
    : `${hms[1]}:${pad(hms[2])}`;
}

function pad(n: number): string {
  return String(n).padStart(2, '0');
}
