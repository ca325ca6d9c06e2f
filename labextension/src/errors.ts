/**
 * Errors, shown whole. JupyterLab cuts a toast's text at 140 characters, and a spec error
 * lists every valid value: so a failure is a toast that says what failed and why, as far as
 * it fits, with a "Details" action that opens a dialog holding the whole message.
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { ReadonlyJSONValue } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';

/** What JupyterLab's toasts show of a message (`MAX_MESSAGE_LENGTH` in apputils-extension). */
const TOAST_LENGTH = 140;

/** How long an error toast stays when its text is whole; a cut one stays until closed. */
const ERROR_TOAST_MS = 10_000;

/** A person's reading of `error`: an `ApiError`'s or a `ResponseError`'s message (the server's
 * words), or whatever else was thrown. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) {
    return error.message || error.name;
  }
  return String(error);
}

/** `text` as a toast shows it: whole if it fits, else cut at a word and ended with "…". */
export function toastText(text: string): string {
  if (text.length <= TOAST_LENGTH) {
    return text;
  }
  const room = text.slice(0, TOAST_LENGTH - 1);
  const space = room.lastIndexOf(' ');
  return `${space > TOAST_LENGTH / 2 ? room.slice(0, space) : room}…`;
}

/** The toast's action that shows the whole `message` under `title`. */
export function detailsAction(title: string, message: string): Notification.IAction {
  return {
    label: 'Details',
    caption: 'Show the whole message',
    callback: () => void showDetails(title, message)
  };
}

/** The options of an error toast about `message`: a Details action, and no timeout when the
 * toast cannot hold the text whole. */
export function errorToastOptions(
  title: string,
  text: string,
  message: string
): Notification.IOptions<ReadonlyJSONValue> {
  return {
    autoClose: toastText(text) === text ? ERROR_TOAST_MS : false,
    actions: [detailsAction(title, message)]
  };
}

/** An error toast: "`what` failed: why", with the whole message one click away. */
export function notifyError(what: string, error: unknown): string {
  const message = errorMessage(error);
  const text = `${what} failed: ${message}`;
  return Notification.error(toastText(text), errorToastOptions(`${what} failed`, text, message));
}

/** A dialog with the whole `message`, as it came (line breaks kept, selectable). */
export async function showDetails(title: string, message: string): Promise<void> {
  const body = new Widget({ node: document.createElement('pre') });
  body.addClass('jp-gtc-ErrorDetails');
  body.node.textContent = message;
  await showDialog({ title, body, buttons: [Dialog.okButton({ label: 'Close' })] });
}
