import { LabIcon } from '@jupyterlab/ui-components';

/** Three stacked nodes: the "Training Clusters" icon of the left bar. `jp-icon3` takes the
 * theme's icon colour, so it reads in light and dark themes alike. */
const CLUSTER_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161" fill-rule="evenodd">
    <path d="M4 2.5h16a1.5 1.5 0 0 1 1.5 1.5v3a1.5 1.5 0 0 1-1.5 1.5H4A1.5 1.5 0 0 1 2.5 7V4A1.5 1.5 0 0 1 4 2.5zM5 4.5v2h2v-2zm4 0v2h2v-2z"/>
    <path d="M4 9.5h16a1.5 1.5 0 0 1 1.5 1.5v3a1.5 1.5 0 0 1-1.5 1.5H4A1.5 1.5 0 0 1 2.5 14v-3A1.5 1.5 0 0 1 4 9.5zM5 11.5v2h2v-2zm4 0v2h2v-2z"/>
    <path d="M4 16.5h16a1.5 1.5 0 0 1 1.5 1.5v3a1.5 1.5 0 0 1-1.5 1.5H4A1.5 1.5 0 0 1 2.5 21v-3A1.5 1.5 0 0 1 4 16.5zM5 18.5v2h2v-2zm4 0v2h2v-2z"/>
  </g>
</svg>`;

export const clusterIcon = new LabIcon({ name: 'jupyter-gtc:cluster', svgstr: CLUSTER_SVG });

/** A line chart: the tab of a job's metrics. */
const METRICS_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M3 3h2v16h16v2H3z"/>
    <path d="M7.7 15.7 6.3 14.3l4.2-4.2 3 3 5.3-5.3 1.4 1.4-6.7 6.7-3-3z"/>
  </g>
</svg>`;

export const metricsIcon = new LabIcon({ name: 'jupyter-gtc:metrics', svgstr: METRICS_SVG });
