/**
 * How the sidebar's sections share its height. Each is a collapsible section of a Lumino
 * `AccordionPanel`, with its own scroll; this sizes them to their content: a section whose
 * content fits in its share gets just that (a short cluster list shows whole, with no empty
 * band below it), and what it leaves goes to the others, equally among those that need more.
 * Once the user drags a divider, the sizes are theirs and are not touched again.
 */
import { IDisposable } from '@lumino/disposable';
import { AccordionPanel, SplitLayout, Widget } from '@lumino/widgets';

export class SectionFit implements IDisposable {
  constructor(private readonly panel: AccordionPanel) {
    panel.handleMoved.connect(this._onHandleMoved, this);
    panel.expansionToggled.connect(this.schedule, this);
    this._sizes = new ResizeObserver(() => this.schedule());
    this._sizes.observe(panel.node);
    // Each section's own box too: Lumino lays the sections out at a frame of its own, which
    // can come after the fit that a change of the panel's size scheduled. That fit then read
    // the old sizes and changed nothing; Lumino spread the new space equally (+67 px each in
    // a failed run: a cut Jobs list between two sections with room to spare), and the panel,
    // already at its new size, never told us again. A section's resize does.
    panel.widgets.forEach(w => this._sizes.observe(w.node));
    // A section's React root can be replaced ("Loading…", then the list): watch its children.
    this._children = new MutationObserver(() => this._observeContents());
    panel.widgets.forEach(w => this._children.observe(w.node, { childList: true }));
    this._observeContents();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    this._sizes.disconnect();
    this._children.disconnect();
    cancelAnimationFrame(this._frame);
  }

  /** Fit at the next frame (after React has rendered and the browser laid it out). */
  schedule(): void {
    if (!this._frame && !this._manual && !this._disposed) {
      this._frame = requestAnimationFrame(() => {
        this._frame = 0;
        this.fit();
      });
    }
  }

  /** Size the sections to their content now. */
  fit(): void {
    if (this._manual || !this.panel.isVisible) {
      return;
    }
    // Lumino hears of a new size only from its parent layout. One made by CSS alone (a line
    // coming or going in the sidebar's header) leaves its sizers at the old total, so it
    // measures its node first.
    this.panel.processMessage(Widget.ResizeMessage.UnknownSize);
    const widgets = this.panel.widgets;
    const current = (this.panel.layout as SplitLayout).absoluteSizes();
    const space = widgets.reduce((sum, w, i) => sum + (w.isHidden ? 0 : current[i] ?? 0), 0);
    if (space <= 0) {
      return; // not laid out yet
    }
    const demands = widgets.map(w => (w.isHidden ? 0 : contentHeight(w)));
    const sizes = shareHeight(space, demands, widgets.map(w => !w.isHidden));
    if (sizes.some((size, i) => Math.abs(size - (current[i] ?? 0)) >= 1)) {
      this.panel.setRelativeSizes(sizes);
    }
  }

  private _onHandleMoved(): void {
    this._manual = true;
  }

  private _observeContents(): void {
    for (const w of this.panel.widgets) {
      for (const child of Array.from(w.node.children)) {
        this._sizes.observe(child);
      }
    }
    this.schedule();
  }

  private _disposed = false;
  private _frame = 0;
  private _manual = false;
  private _sizes: ResizeObserver;
  private _children: MutationObserver;
}

/**
 * Share `space` pixels among sections that want `demands` (0 for a collapsed one): the
 * smallest first get all they want while it is no more than an equal share of what is
 * left; the rest split what remains equally. What no section wants goes to the last open one.
 */
export function shareHeight(space: number, demands: number[], open: boolean[]): number[] {
  const sizes = demands.map(() => 0);
  const order = demands.map((_, i) => i).filter(i => open[i]);
  if (order.length === 0) {
    return sizes;
  }
  let left = space;
  let remaining = order.length;
  for (const i of [...order].sort((a, b) => demands[a] - demands[b])) {
    sizes[i] = Math.min(demands[i], left / remaining);
    left -= sizes[i];
    remaining -= 1;
  }
  sizes[order[order.length - 1]] += left;
  return sizes;
}

/** The height `widget`'s content takes, whatever height the section has now; a pixel more,
 * so rounding never shows a scrollbar on content that fits. */
function contentHeight(widget: Widget): number {
  const node = widget.node;
  const style = getComputedStyle(node);
  const padding = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);
  const children = Array.from(node.children).reduce((sum, child) => {
    const margins = getComputedStyle(child);
    return sum + child.getBoundingClientRect().height + parseFloat(margins.marginTop) + parseFloat(margins.marginBottom);
  }, 0);
  return Math.ceil(children + padding) + 1;
}
