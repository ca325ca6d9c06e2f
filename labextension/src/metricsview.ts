/**
 * A job's scalars as live line charts in a main-area tab: a small chart per tag, each on its
 * own y range (as TensorBoard draws them: one axis for all would flatten a loss of 2 beside
 * tokens/s of 8,000 to a line at 0), a line per run in each, in a grid that fits the tab; a
 * tag picker that shows each line's latest value, a log-y toggle, and the values under the
 * pointer (at that step in every chart). Charts are in order of tag name, so tags under one
 * prefix (`train/`, `perf/`) sit together; all share the x range (steps). It follows the job by cursor reads (`GET jobs/<cluster>/<id>/metrics?since=N`):
 * each read asks only for points it has not had.
 *
 * Drawn as SVG with theme variables (axes, grid, and a palette that base.css sets for light
 * and dark themes). A long series is thinned to each pixel column's first, lowest, highest
 * and last point, so it draws fast and spikes stay visible; all points are kept.
 *
 * A job that resumed from a checkpoint (requeued) reports the steps after its checkpoint
 * again: each step is drawn once, the newer attempt's, by TensorBoard's purge rule (as
 * `metrics/resumed.py` does for `job.metrics()` and the notebook's plot). A series' points are
 * taken in the order written (wall time): a point whose step is not past the series' last
 * first drops the series' points from that step on. Where a series' step went back, a
 * requeued attempt resumed: every chart marks that step with a dashed line and a label
 * (`ResumeFinder`, the rule of `metrics/resumed.py`'s).
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { IMetricsChunk, IScalar, requestAPI } from './api';
import { createJobTab } from './jobtab';
import { metricsIcon } from './icons';

const FOLLOW_MS = 1000; // while the job runs
const FINISHED_MS = 5000; // after: a requeued job writes again
const RETRY_MS = 3000; // while the server cannot be reached
const PALETTE_SIZE = 10; // --jp-gtc-series-0 ... -9 in base.css, light and dark
const MARGIN = { left: 60, right: 16, top: 24, bottom: 34 };
const MIN_CHART_WIDTH = 320; // px: narrower, the axis labels crowd the lines
const MIN_CHART_HEIGHT = 160; // px: below it, charts scroll rather than shrink
const GAP = 6; // px between charts, as base.css's grid gap
const SVG_NS = 'http://www.w3.org/2000/svg';

/** A scalar as a series keeps it. */
interface IPoint {
  step: number;
  value: number | null;
  wallTime: number;
}

/** One line: a tag, or a tag of an event file below the log dir (`tag (run)`). */
interface ISeries {
  key: string;
  /** The chart it is drawn in: its tag's. */
  tag: string;
  /** The points drawn: each step once, steps ascending (`purge`). */
  steps: number[];
  values: (number | null)[];
  /** Every point read, in the order written (wall time): what `steps` is made from again
   * when a read brings points older than the newest (an earlier event file's tail). */
  written: IPoint[];
  shown: boolean;
  color: number;
  /** Its row in the tag picker. */
  row: HTMLElement;
  value: HTMLElement;
}

/** A tag's chart: its lines, and how it was last drawn (for the pointer). */
interface IChart {
  tag: string;
  node: HTMLElement;
  svg: SVGSVGElement;
  series: ISeries[];
  scales: IScales | null;
}

interface IScales {
  sx: (step: number) => number;
  sy: (value: number) => number;
  x0: number;
  x1: number;
  plot: { left: number; top: number; right: number; bottom: number };
  shown: ISeries[];
  log: boolean;
}

/** Where a requeued attempt took over: the first step it wrote, and which attempt it was. */
export interface IResume {
  step: number;
  attempt: number;
}

/**
 * The resume points of a job from its points as they come, by `metrics/resumed.py`'s rule:
 * a series shows a requeue where its step goes back; one requeue is the drops whose spans
 * (the old attempt's last point to the new one's first, in wall time) overlap, and it
 * resumed at the lowest of their steps (a sparse tag like `lr` comes back later than `loss`).
 */
export class ResumeFinder {
  /** Take a series' new point (in the order written); whether the resume points changed. */
  add(key: string, point: IPoint): boolean {
    const last = this._last.get(key);
    if (last && point.wallTime < last.wallTime) {
      return false; // an earlier event file's tail read late: it says nothing of a requeue
    }
    this._last.set(key, point);
    if (!last || point.step > last.step) {
      return false;
    }
    for (const r of this._requeues) {
      if (last.wallTime <= r.until && point.wallTime >= r.since) {
        const before = r.step;
        r.since = Math.max(r.since, last.wallTime);
        r.until = Math.min(r.until, point.wallTime);
        r.step = Math.min(r.step, point.step);
        return r.step !== before;
      }
    }
    this._requeues.push({ since: last.wallTime, until: point.wallTime, step: point.step });
    this._requeues.sort((a, b) => a.since - b.since);
    return true;
  }

  get resumes(): IResume[] {
    return this._requeues.map((r, i) => ({ step: r.step, attempt: i + 2 }));
  }

  private _last = new Map<string, IPoint>();
  private _requeues: { since: number; until: number; step: number }[] = [];
}

export class JobMetrics extends Widget {
  constructor(
    readonly cluster: string,
    readonly jobId: string
  ) {
    super();
    this.addClass('jp-gtc-Metrics');
    this.node.dataset.points = '0';

    const toolbar = element('div', 'jp-gtc-Metrics-toolbar');
    this._status = element('span', 'jp-gtc-Metrics-status');
    this._cursor = element('span', 'jp-gtc-Metrics-cursor');
    const logY = element('label', 'jp-gtc-Metrics-logy');
    this._logY = document.createElement('input');
    this._logY.type = 'checkbox';
    this._logY.addEventListener('change', () => this._scheduleDraw());
    logY.append(this._logY, ' log y');
    toolbar.append(this._status, this._cursor, logY);

    const body = element('div', 'jp-gtc-Metrics-body');
    this._grid = element('div', 'jp-gtc-Metrics-charts');
    this._empty = element('div', 'jp-gtc-Metrics-empty');
    this._empty.textContent =
      'No scalars yet. A job writes them with a TensorBoard SummaryWriter under ' +
      '$AIP_TENSORBOARD_LOG_DIR, or reports them with cloudml-hypertune.';
    this._grid.append(this._empty);
    this._tags = element('ul', 'jp-gtc-Metrics-tags');
    this._tags.setAttribute('aria-label', 'Tags');
    body.append(this._grid, this._tags);
    this.node.append(toolbar, body);
    void this._follow();
  }

  /** Points per line (each step once), by its key. */
  get pointCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    this._series.forEach(s => (counts[s.key] = s.steps.length));
    return counts;
  }

  protected onAfterShow(msg: Message): void {
    this._scheduleDraw();
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    this._scheduleDraw();
  }

  protected onBeforeDetach(msg: Message): void {
    cancelAnimationFrame(this._frame);
    this._frame = 0;
  }

  // -- reading ------------------------------------------------------------------------

  private async _follow(): Promise<void> {
    const path = `jobs/${encodeURIComponent(this.cluster)}/${encodeURIComponent(this.jobId)}/metrics`;
    while (!this.isDisposed) {
      let delay = FOLLOW_MS;
      try {
        const chunk = await requestAPI<IMetricsChunk>(`${path}?since=${this._next}`);
        this._next = chunk.next;
        this._add(chunk.scalars);
        if (chunk.finished) {
          delay = chunk.scalars.length ? 0 : FINISHED_MS; // read to the end, then rest
        }
        this._setStatus(chunk.finished ? 'The job has finished.' : 'Following the job’s scalars as it writes them…');
      } catch (error) {
        this._setStatus(`Cannot read the metrics: ${(error as Error).message}. Retrying…`);
        delay = RETRY_MS;
      }
      await new Promise(resolve => setTimeout(resolve, delay));
    }
  }

  private _add(scalars: IScalar[]): void {
    if (!scalars.length) {
      return;
    }
    for (const s of scalars) {
      const key = s.run ? `${s.tag} (${s.run})` : s.tag;
      const series = this._series.get(key) ?? this._newSeries(key, s.tag);
      const point = { step: s.step, value: s.value, wallTime: s.wall_time };
      addPoint(series, point);
      this._resumeFinder.add(key, point);
    }
    let total = 0;
    this._series.forEach(s => {
      total += s.steps.length;
      s.value.textContent = formatValue(lastValue(s));
    });
    this.node.dataset.points = String(total);
    this._scheduleDraw();
  }

  private _newSeries(key: string, tag: string): ISeries {
    const color = this._series.size % PALETTE_SIZE;
    const row = element('li', 'jp-gtc-Metrics-tag');
    row.dataset.tag = key;
    const label = element('label', '');
    const box = document.createElement('input');
    box.type = 'checkbox';
    // `progress/...` (total steps, for the job panel's progress bar) is bookkeeping, not a curve.
    box.checked = !key.startsWith('progress/');
    const swatch = paint(element('span', 'jp-gtc-Metrics-swatch'), color);
    const name = element('span', 'jp-gtc-Metrics-tagName');
    name.textContent = key;
    name.title = key;
    const value = element('span', 'jp-gtc-Metrics-value');
    label.append(box, swatch, name, value);
    row.append(label);
    const series: ISeries = { key, tag, steps: [], values: [], written: [], shown: box.checked, color, row, value };
    (this._charts.get(tag) ?? this._newChart(tag)).series.push(series);
    box.addEventListener('change', () => {
      series.shown = box.checked;
      this._scheduleDraw();
    });
    const after = [...this._series.keys()].sort().find(k => k > key);
    this._tags.insertBefore(row, after ? this._series.get(after)!.row : null); // tags in order of name
    this._series.set(key, series);
    return series;
  }

  private _newChart(tag: string): IChart {
    const node = element('div', 'jp-gtc-Metrics-chart');
    node.dataset.tag = tag;
    const svg = document.createElementNS(SVG_NS, 'svg');
    svg.setAttribute('aria-label', tag);
    node.append(svg);
    const chart: IChart = { tag, node, svg, series: [], scales: null };
    svg.addEventListener('mousemove', event => this._hover(chart, event));
    svg.addEventListener('mouseleave', () => this._hover(null, null));
    this._charts.set(tag, chart);
    return chart;
  }

  /** The resume points marked on the charts. */
  get resumes(): IResume[] {
    return this._resumeFinder.resumes;
  }

  private _setStatus(message: string): void {
    if (this._status.textContent !== message) {
      this._status.textContent = message;
    }
  }

  // -- drawing ------------------------------------------------------------------------

  private _scheduleDraw(): void {
    if (!this._frame && this.isVisible) {
      this._frame = requestAnimationFrame(() => {
        this._frame = 0;
        this._draw();
      });
    }
  }

  /** Lay the charts out in a grid that fits the tab (as many columns of at least
   * MIN_CHART_WIDTH as fit; rows share the height down to MIN_CHART_HEIGHT, then scroll),
   * then draw each. Sizes are worked out here, not read back from each chart's box. */
  private _draw(): void {
    const width = this._grid.clientWidth;
    const height = this._grid.clientHeight;
    this._empty.hidden = this._series.size > 0;
    const log = this._logY.checked;
    const shown = (c: IChart) => c.series.filter(s => s.shown && s.steps.length);
    const visible = [...this._charts.values()].filter(c => shown(c).length).sort((a, b) => (a.tag < b.tag ? -1 : 1));
    const cols = Math.max(1, Math.min(visible.length, Math.floor((width + GAP) / (MIN_CHART_WIDTH + GAP))));
    const rows = Math.ceil(visible.length / cols);
    const chartWidth = Math.floor((width - GAP * (cols - 1)) / cols);
    const chartHeight = Math.max(MIN_CHART_HEIGHT, Math.floor((height - GAP * (rows - 1)) / Math.max(rows, 1)));
    const scrolls = rows * chartHeight + GAP * (rows - 1) > height;
    // A scrollbar takes its width from the charts: narrow them rather than overflow sideways.
    const drawnWidth = scrolls ? Math.floor((width - 16 - GAP * (cols - 1)) / cols) : chartWidth;
    this._grid.style.gridTemplateColumns = `repeat(${cols}, ${drawnWidth}px)`;
    this._grid.style.gridAutoRows = `${chartHeight}px`;
    const order = new Map(visible.map((c, i) => [c.tag, i]));
    this._charts.forEach(c => {
      const at = order.get(c.tag);
      c.node.hidden = at === undefined;
      c.scales = null;
      if (at === undefined) {
        c.node.remove();
      }
    });
    visible.forEach((c, i) => {
      if (this._grid.children[i + 1] !== c.node) {
        this._grid.insertBefore(c.node, this._grid.children[i + 1] ?? null); // after the empty note
      }
    });
    const finite = (v: number | null) => v !== null && Number.isFinite(v) && (!log || v > 0);
    const steps: number[] = []; // every chart's [first, last] step: they share the x range
    visible.forEach(c => shown(c).forEach(s => steps.push(...range(s.steps, () => true))));
    const x = extent(steps);
    for (const c of visible) {
      this._drawChart(c, shown(c), x, drawnWidth, chartHeight, log, finite);
    }
    this._hover(this._pointerChart, this._lastPointer);
  }

  private _drawChart(
    chart: IChart,
    shown: ISeries[],
    x: [number, number] | null,
    width: number,
    height: number,
    log: boolean,
    finite: (v: number | null) => boolean
  ): void {
    const svg = chart.svg;
    svg.replaceChildren();
    svg.setAttribute('width', String(width));
    svg.setAttribute('height', String(height));
    const title = text(MARGIN.left, 15, chart.tag, 'start', '0');
    title.setAttribute('class', 'jp-gtc-Metrics-title');
    svg.append(title);
    const y = extent(([] as number[]).concat(...shown.map(s => range(s.values, finite))));
    if (!x || !y || width < MARGIN.left + MARGIN.right + 20 || height < MARGIN.top + MARGIN.bottom + 20) {
      return;
    }
    const plot = { left: MARGIN.left, top: MARGIN.top, right: width - MARGIN.right, bottom: height - MARGIN.bottom };
    const [y0, y1] = log ? [y[0] / 1.2, y[1] * 1.2] : padded(y[0], y[1]);
    const yTicks = log ? logTicks(y0, y1) : niceTicks(y0, y1, 4);
    const xTicks = niceTicks(x[0], x[1], Math.max(2, Math.floor((plot.right - plot.left) / 80))).filter(t =>
      Number.isInteger(t)
    );
    const [x0, x1] = x[0] === x[1] ? [x[0] - 1, x[1] + 1] : x;
    const toY = log ? (v: number) => Math.log10(v) : (v: number) => v;
    const sx = (step: number) => plot.left + ((step - x0) / (x1 - x0)) * (plot.right - plot.left);
    const sy = (v: number) => plot.bottom - ((toY(v) - toY(y0)) / (toY(y1) - toY(y0))) * (plot.bottom - plot.top);

    const yStep = log ? 0 : yTicks[1] - yTicks[0] || 0;
    const xStep = xTicks[1] - xTicks[0] || 0;
    const grid = svgElement('g', 'jp-gtc-Metrics-grid');
    const axes = svgElement('g', 'jp-gtc-Metrics-axes');
    for (const t of yTicks.filter(t => t >= y0 && t <= y1)) {
      grid.append(line(plot.left, sy(t), plot.right, sy(t)));
      axes.append(text(plot.left - 6, sy(t), formatTick(t, yStep), 'end', '0.32em'));
    }
    for (const t of xTicks.filter(t => t >= x0 && t <= x1)) {
      grid.append(line(sx(t), plot.top, sx(t), plot.bottom));
      axes.append(text(sx(t), plot.bottom + 16, formatTick(t, xStep), 'middle', '0'));
    }
    axes.append(line(plot.left, plot.bottom, plot.right, plot.bottom), line(plot.left, plot.top, plot.left, plot.bottom));
    axes.append(text((plot.left + plot.right) / 2, height - 4, 'step', 'middle', '0'));
    svg.append(grid, axes);

    const resumes = svgElement('g', 'jp-gtc-Metrics-resumes');
    for (const r of this._resumeFinder.resumes.filter(r => r.step >= x0 && r.step <= x1)) {
      const mark = svgElement('g', 'jp-gtc-Metrics-resume');
      mark.dataset.step = String(r.step);
      const label = text(sx(r.step) + 3, plot.top + 10, `requeued: attempt ${r.attempt} from step ${r.step}`, 'start', '0');
      mark.append(line(sx(r.step), plot.top, sx(r.step), plot.bottom), label);
      resumes.append(mark);
    }
    svg.append(resumes);

    const lines = svgElement('g', 'jp-gtc-Metrics-lines');
    for (const s of shown) {
      const path = paint(svgElement('path', 'jp-gtc-Metrics-line'), s.color);
      path.setAttribute('d', pathData(s, sx, sy, log));
      path.dataset.tag = s.key;
      path.dataset.points = String(s.steps.length);
      lines.append(path);
    }
    svg.append(lines);
    chart.scales = { sx, sy, x0, x1, plot, shown, log };
  }

  /** A rule at the step under the pointer in every chart, a dot on each line there, and
   * the lines' values at it in the picker. */
  private _hover(chart: IChart | null, event: MouseEvent | null): void {
    this._lastPointer = event;
    this._pointerChart = chart;
    this._charts.forEach(c => c.svg.querySelector('.jp-gtc-Metrics-hover')?.remove());
    const scales = chart?.scales;
    const px = event && chart ? event.clientX - chart.svg.getBoundingClientRect().left : NaN;
    if (!scales || !event || px < scales.plot.left || px > scales.plot.right) {
      this._cursor.textContent = '';
      this._series.forEach(s => (s.value.textContent = formatValue(lastValue(s))));
      return;
    }
    const step = scales.x0 + ((px - scales.plot.left) / (scales.plot.right - scales.plot.left)) * (scales.x1 - scales.x0);
    let nearestStep: number | null = null;
    this._series.forEach(s => {
      const i = nearest(s.steps, step);
      s.value.textContent = i < 0 ? '' : formatValue(s.values[i]);
    });
    this._charts.forEach(c => {
      const cs = c.scales;
      if (!cs) {
        return;
      }
      const group = svgElement('g', 'jp-gtc-Metrics-hover');
      group.append(line(cs.sx(step), cs.plot.top, cs.sx(step), cs.plot.bottom));
      for (const s of cs.shown) {
        const i = nearest(s.steps, step);
        const v = i < 0 ? null : s.values[i];
        if (i >= 0 && v !== null && (!cs.log || v > 0)) {
          const dot = paint(svgElement('circle'), s.color);
          dot.setAttribute('cx', String(cs.sx(s.steps[i])));
          dot.setAttribute('cy', String(cs.sy(v)));
          dot.setAttribute('r', '3');
          group.append(dot);
          nearestStep = s.steps[i];
        }
      }
      c.svg.append(group);
    });
    this._cursor.textContent = nearestStep === null ? '' : `step ${nearestStep}`;
  }

  private _series = new Map<string, ISeries>();
  private _charts = new Map<string, IChart>();
  private _resumeFinder = new ResumeFinder();
  private _next = 0;
  private _frame = 0;
  private _lastPointer: MouseEvent | null = null;
  private _pointerChart: IChart | null = null;
  private _status: HTMLElement;
  private _cursor: HTMLElement;
  private _logY: HTMLInputElement;
  private _grid: HTMLElement;
  private _empty: HTMLElement;
  private _tags: HTMLElement;
}

/** The tab, titled with the job's name once known. */
export function createMetricsTab(cluster: string, jobId: string): MainAreaWidget<JobMetrics> {
  return createJobTab(new JobMetrics(cluster, jobId), {
    kind: 'metrics',
    noun: 'Metrics',
    icon: metricsIcon,
    where: job => (job.job_dir ? `${job.job_dir}/logs` : 'no log dir: not submitted through jupyter_gtc')
  });
}

// -- each step once ------------------------------------------------------------------

/** Add a point to a series by TensorBoard's purge rule: a step at or before the series' last
 * drops the points from that step on (a resumed job redid them), then it is appended. A point
 * written before the newest one read (an earlier event file read late) goes in its place in
 * the written order, and the drawn points are made again from that order. */
export function addPoint(series: Pick<ISeries, 'steps' | 'values' | 'written'>, point: IPoint): void {
  const written = series.written;
  if (!written.length || written[written.length - 1].wallTime <= point.wallTime) {
    written.push(point);
    purge(series, point);
    return;
  }
  let at = written.length; // after every point written no later than it: equal times keep the read order
  while (at > 0 && written[at - 1].wallTime > point.wallTime) {
    at--;
  }
  written.splice(at, 0, point);
  series.steps.length = 0;
  series.values.length = 0;
  written.forEach(p => purge(series, p));
}

/** Append `point` to the drawn points, first dropping those at its step or after. */
function purge(series: Pick<ISeries, 'steps' | 'values'>, point: IPoint): void {
  const steps = series.steps;
  if (steps.length && steps[steps.length - 1] >= point.step) {
    // The drawn steps ascend: the first at or past `point.step`, by bisection.
    let lo = 0;
    let hi = steps.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (steps[mid] < point.step) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    steps.length = lo;
    series.values.length = lo;
  }
  steps.push(point.step);
  series.values.push(point.value);
}

// -- the chart's arithmetic ------------------------------------------------------------

/** The SVG path of a line, thinned to each pixel column's first, lowest, highest and last
 * point; a null (NaN) or, on a log scale, a value <= 0 breaks the line. */
function pathData(
  s: ISeries,
  sx: (step: number) => number,
  sy: (v: number) => number,
  log: boolean
): string {
  const parts: string[] = [];
  let pen = false;
  let column = NaN;
  let bucket: number[] = []; // indices of the current column's points
  const flush = () => {
    if (!bucket.length) {
      return;
    }
    let lo = bucket[0];
    let hi = bucket[0];
    for (const i of bucket) {
      lo = s.values[i]! < s.values[lo]! ? i : lo;
      hi = s.values[i]! > s.values[hi]! ? i : hi;
    }
    const keep = [...new Set([bucket[0], lo, hi, bucket[bucket.length - 1]])].sort((a, b) => a - b);
    for (const i of keep) {
      parts.push(`${pen ? 'L' : 'M'}${sx(s.steps[i]).toFixed(1)},${sy(s.values[i]!).toFixed(1)}`);
      pen = true;
    }
    bucket = [];
  };
  for (let i = 0; i < s.steps.length; i++) {
    const v = s.values[i];
    if (v === null || !Number.isFinite(v) || (log && v <= 0)) {
      flush();
      pen = false;
      continue;
    }
    const c = Math.round(sx(s.steps[i]));
    if (c !== column) {
      flush();
      column = c;
    }
    bucket.push(i);
  }
  flush();
  return parts.join('');
}

/** [lowest, highest] of the values that `keep` accepts; [] when none is. (A loop: a spread
 * of 100,000 values into Math.min overflows the stack.) */
function range<T extends number | null>(values: T[], keep: (v: T) => boolean): number[] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (keep(v)) {
      lo = Math.min(lo, v as number);
      hi = Math.max(hi, v as number);
    }
  }
  return lo <= hi ? [lo, hi] : [];
}

function extent(values: number[]): [number, number] | null {
  return values.length ? [Math.min(...values), Math.max(...values)] : null;
}

/** A little room above and below the lines; a flat line gets a band around it. */
function padded(lo: number, hi: number): [number, number] {
  const span = hi - lo || Math.abs(hi) || 1;
  return [lo - span * 0.05, hi + span * 0.05];
}

/** About `count` round ticks (1, 2 or 5 times a power of ten apart) covering [lo, hi]. */
export function niceTicks(lo: number, hi: number, count = 6): number[] {
  if (!(hi > lo)) {
    const pad = Math.abs(lo) * 0.1 || 1;
    [lo, hi] = [lo - pad, hi + pad];
  }
  const rough = (hi - lo) / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const norm = rough / power;
  const step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * power;
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push(Number(t.toPrecision(12)));
  }
  return ticks;
}

/** Ticks in [lo, hi] (lo > 0) on a log scale: powers of ten, or also 2 and 5 times them
 * when the range spans few decades. */
export function logTicks(lo: number, hi: number): number[] {
  const first = Math.floor(Math.log10(lo));
  const last = Math.ceil(Math.log10(hi));
  const ticks = (multiples: number[]) => {
    const out: number[] = [];
    for (let p = first; p <= last; p++) {
      multiples.forEach(m => out.push(Number((m * 10 ** p).toPrecision(12))));
    }
    return out.filter(t => t >= lo && t <= hi);
  };
  const powers = ticks([1]);
  return powers.length >= 3 ? powers : ticks([1, 2, 5]).length >= 3 ? ticks([1, 2, 5]) : ticks([1, 2, 3, 4, 5, 6, 7, 8, 9]);
}

/** The index of the point whose step is nearest `step` (steps ascending); -1 for none. */
function nearest(steps: number[], step: number): number {
  let lo = 0;
  let hi = steps.length - 1;
  if (hi < 0) {
    return -1;
  }
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (steps[mid] < step) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo > 0 && Math.abs(steps[lo - 1] - step) <= Math.abs(steps[lo] - step) ? lo - 1 : lo;
}

function lastValue(s: ISeries): number | null {
  return s.values.length ? s.values[s.values.length - 1] : null;
}

function formatValue(v: number | null): string {
  if (v === null) {
    return 'NaN';
  }
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e6 || a < 1e-3) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
}

/** A tick's label, with as many digits as the ticks' spacing `step` needs (0: one digit), so
 * neighbours differ: 2.7e-4, 2.8e-4, not 3e-4 three times. */
function formatTick(v: number, step = 0): string {
  const a = Math.abs(v);
  const digits = step > 0 && a > 0 ? Math.max(0, Math.floor(Math.log10(a)) - Math.floor(Math.log10(step))) : 0;
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(digits) : String(Number(v.toPrecision(6)));
}

// -- DOM helpers -----------------------------------------------------------------------

function element(tag: string, className: string): HTMLElement {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  return node;
}

/** `node` drawn in colour `color` of the theme's series palette (base.css uses --jp-gtc-color). */
function paint<N extends HTMLElement | SVGElement>(node: N, color: number): N {
  node.style.setProperty('--jp-gtc-color', `var(--jp-gtc-series-${color})`);
  return node;
}

function svgElement(tag: string, className = ''): SVGElement {
  const node = document.createElementNS(SVG_NS, tag);
  if (className) {
    node.setAttribute('class', className);
  }
  return node;
}

function line(x1: number, y1: number, x2: number, y2: number): SVGElement {
  const node = svgElement('line');
  for (const [name, value] of Object.entries({ x1, y1, x2, y2 })) {
    node.setAttribute(name, value.toFixed(1));
  }
  return node;
}

function text(x: number, y: number, content: string, anchor: string, dy: string): SVGElement {
  const node = svgElement('text');
  node.setAttribute('x', x.toFixed(1));
  node.setAttribute('y', y.toFixed(1));
  node.setAttribute('text-anchor', anchor);
  node.setAttribute('dy', dy);
  node.textContent = content;
  return node;
}
