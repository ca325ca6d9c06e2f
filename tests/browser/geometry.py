"""What the sidebar looks like, measured in the page: whether its buttons lie inside it and
can be clicked, whether its texts are whole, how its sections share its height."""

from __future__ import annotations

import time

SIDEBAR = "#jupyter-gtc-sidebar"

# Each action button of a cluster card, a job row, a study and a trial row: scrolled into
# view in its section, is it inside the panel's box, and is it what a click at its centre
# lands on (nothing covers it, no scroll box clips it)?
_BUTTONS = """sidebar => {
  const box = sidebar.getBoundingClientRect();
  const rows = '.jp-gtc-Trial, .jp-gtc-Job, .jp-gtc-Study, .jp-gtc-Cluster';
  return [...sidebar.querySelectorAll('[data-command]')].filter(b => b.closest(rows)).map(button => {
    button.scrollIntoView({ block: 'center', inline: 'nearest' });
    const r = button.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    const row = button.closest(rows);
    const id = row.dataset.trial ?? row.dataset.job ?? row.dataset.study ?? row.dataset.cluster;
    return {
      row: `${row.classList[0]} ${id}`,
      command: button.dataset.command,
      inside: r.width > 0 && r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom,
      clickable: hit !== null && button.contains(hit),
      box: [Math.round(r.left), Math.round(r.top), Math.round(r.right), Math.round(r.bottom)],
    };
  });
}"""

# Texts that must be readable: each is whole where it is laid out (no box between it and the
# panel cuts it off sideways; a box that scrolls sideways does not count), or a tooltip
# (its own or an ancestor's title) holds it whole.
_TEXTS = """(sidebar, selector) => {
  const cut = [];
  for (const el of sidebar.querySelectorAll(selector)) {
    const text = el.textContent.trim();
    const titled = el.closest('[title]');
    if (!text || (titled && sidebar.contains(titled) && titled.title.includes(text))) {
      continue;
    }
    const range = document.createRange();
    range.selectNodeContents(el);
    const rects = [...range.getClientRects()].filter(r => r.width > 0);
    for (let box = el; box && box !== sidebar.parentElement; box = box.parentElement) {
      const overflow = getComputedStyle(box).overflowX;
      if (overflow === 'visible' || overflow === 'auto' || overflow === 'scroll') {
        continue;
      }
      const b = box.getBoundingClientRect();
      if (rects.some(r => r.left < b.left - 0.5 || r.right > b.right + 0.5)) {
        cut.push({ text, by: box.className, right: Math.round(Math.max(...rects.map(r => r.right))), edge: Math.round(b.right) });
        break;
      }
    }
  }
  return cut;
}"""

# Every text of a row, card or line that says what something is or why.
TEXTS = ", ".join([
    ".jp-gtc-Cluster-name", ".jp-gtc-Chip", ".jp-gtc-State", ".jp-gtc-Cluster-detail > span", ".jp-gtc-Problem",
    ".jp-gtc-Operation-message", ".jp-gtc-Node-reason td", ".jp-gtc-Job-name", ".jp-gtc-Job-id", ".jp-gtc-Job-user",
    ".jp-gtc-Job-nodes", ".jp-gtc-Job-elapsed", ".jp-gtc-Study-reason", ".jp-gtc-Study-progress", ".jp-gtc-Study-best",
    ".jp-gtc-Trial-value", ".jp-gtc-Trial-reason", ".jp-gtc-Trial-params",
])

# Each open section: the height it has, the height its content takes, and whether it scrolls.
_SECTIONS = """sidebar => [...sidebar.querySelectorAll('.jp-gtc-Section')].filter(s => !s.classList.contains('lm-mod-hidden'))
  .map(s => ({
    label: document.getElementById(s.getAttribute('aria-labelledby'))?.textContent ?? s.className,
    height: s.clientHeight,
    content: [...s.children].reduce((sum, c) => sum + c.getBoundingClientRect().height, 0),
    scrolls: ['auto', 'scroll'].includes(getComputedStyle(s).overflowY),
  }))"""


def buttons(page) -> list[dict]:
    return page.locator(SIDEBAR).evaluate(_BUTTONS)


def cut_texts(page, selector: str = TEXTS) -> list[dict]:
    return page.locator(SIDEBAR).evaluate(_TEXTS, selector)


def sections(page) -> list[dict]:
    return page.locator(SIDEBAR).evaluate(_SECTIONS)


def assert_actions_reachable(page) -> list[dict]:
    """Every action button inside the panel and clickable; returns them."""
    found = buttons(page)
    bad = [b for b in found if not (b["inside"] and b["clickable"])]
    assert not bad, f"buttons outside the panel or covered ({page.locator(SIDEBAR).bounding_box()}): {bad}"
    return found


def assert_texts_whole(page) -> None:
    cut = cut_texts(page)
    assert not cut, f"texts cut short with no tooltip holding them: {cut}"


def assert_sections_share_height(page, minimum: float = 61, timeout: float = 10.0) -> list[dict]:
    """Each section scrolls on its own; while one has more than it can show, none has room
    left over beyond its content (but for one at its minimum height). Waits for that, up to
    ``timeout`` seconds: the sidebar fits its sections at the frame after their content
    changed (a theme's fonts, a new row), and a loaded machine can be a few frames late."""
    deadline = time.monotonic() + timeout
    while True:
        shown = sections(page)
        problem = _sharing_problem(shown, minimum)
        if problem is None:
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(problem)
        page.wait_for_timeout(100)


def _sharing_problem(shown: list[dict], minimum: float) -> str | None:
    if not (shown and all(s["scrolls"] for s in shown)):
        return f"sections that do not scroll on their own: {shown}"
    if any(s["content"] > s["height"] + 2 for s in shown):
        spare = [s for s in shown if s["height"] > s["content"] + 2 and s["height"] > minimum]
        if spare:
            return f"a section is cut while others have room to spare: {shown}"
    return None
