// The ACID view's shared pieces: Airflow's React, Chakra UI and router (Airflow's UI puts the instances it renders
// with on globalThis for React app plugins, so this view uses Airflow's theme and navigation), calls to the view's API
// and to Airflow's, the live-refresh context, and the small components every tab uses (state badges, links, tables).
// No build step: plain ES modules, imported by Airflow's UI from /acid/static/view.js.

export const React = globalThis.React;
export const C = globalThis.ChakraUI;
export const Router = globalThis.ReactRouterDOM;
export const h = React.createElement;

const API = new URL("../api/", import.meta.url);
const AIRFLOW_API = new URL("api/v2/", document.baseURI);

export const FAST_MS = 5000; // while something is queued or working, and for two minutes after an action
export const SLOW_MS = 30000;
export const AFTER_ACTION_MS = 120000;

async function request(url, options) {
  const response = await fetch(url, Object.assign({credentials: "same-origin",
    headers: {"Content-Type": "application/json", "Accept": "application/json"}}, options || {}));
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = body.detail;
    throw new Error(detail ? (typeof detail === "string" ? detail : JSON.stringify(detail))
                           : `${response.status} ${response.statusText}`);
  }
  return body;
}

// The view's API: `path` is relative to /acid/api/ ("compactions?state=initiated").
export function call(path, options) { return request(new URL(path, API), options); }
export function post(path, body) { return call(path, {method: "POST", body: JSON.stringify(body || {})}); }
// Airflow's own REST API (same session cookie): `path` is relative to /api/v2/.
export function airflow(path) { return request(new URL(path, AIRFLOW_API)); }

export function query(values) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    if (value !== null && value !== undefined && value !== "") { params.set(key, String(value)); }
  }
  return params.toString();
}

export function text(value) { return value === null || value === undefined ? "" : String(value); }
export function where(database, table, partition) {
  return `${database}.${table}` + (partition ? ` partition ${partition}` : "");
}

// Airflow's state palettes (its theme's semantic colours), for the ACID words. Aborted is neutral: an operator's
// decision, not a failure.
export const PALETTE = {
  "initiated": "queued", "working": "running", "ready for cleaning": "up_for_reschedule", "succeeded": "success",
  "failed": "failed", "refused": "skipped", "did not initiate": "upstream_failed", "aborted": "none",
  "OPEN": "running", "ABORTED": "none", "ACQUIRED": "success", "WAITING": "queued",
  "queued": "queued", "running": "running", "success": "success", "skipped": "skipped",
  "up_for_retry": "up_for_retry", "upstream_failed": "upstream_failed", "scheduled": "scheduled",
};
export function colour(palette, shade) { return `var(--chakra-colors-${palette}-${shade || "solid"})`; }

// A state as Airflow shows one (its StateBadge: solid, rounded, the state's palette).
export function StateBadge({state}) {
  const palette = PALETTE[state] || "none";
  return h(C.Badge, {borderRadius: "full", colorPalette: palette, color: `${palette}.contrast`, variant: "solid",
                     fontSize: "sm", px: 2, py: 0.5, "data-state": state}, state);
}

// A link inside Airflow's UI (its router: the page changes, the app stays), styled as Airflow's links.
export function AirflowLink({to, children, ...rest}) {
  return h(C.Link, Object.assign({asChild: true, color: "fg.info"}, rest), h(Router.Link, {to}, children));
}

export function Empty({title, children}) {
  return h(C.EmptyState.Root, {size: "sm", borderWidth: "1px", borderRadius: "md", borderStyle: "dashed"},
    h(C.EmptyState.Content, null,
      h(C.EmptyState.Title, null, title),
      children ? h(C.EmptyState.Description, null, children) : null));
}

// A table as Airflow's lists draw theirs (striped, a sticky header); `columns` are header labels, `rows` elements.
export function DataTable({id, columns, rows, caption}) {
  return h(C.Table.ScrollArea, {borderWidth: "1px", borderRadius: "md", maxW: "100%"},
    h(C.Table.Root, {id, size: "sm", striped: true, "aria-label": caption},
      h(C.Table.Header, {bg: "chakra-body-bg", position: "sticky", top: 0, zIndex: 1},
        h(C.Table.Row, null, columns.map((label, index) =>
          h(C.Table.ColumnHeader, {key: index, whiteSpace: "nowrap"}, label)))),
      h(C.Table.Body, null, rows)));
}

// A cell whose text wraps (Airflow's table theme keeps cells on one line; ours hold sentences).
export function Cell({children, ...rest}) {
  return h(C.Table.Cell, Object.assign({verticalAlign: "top", whiteSpace: "normal"}, rest), children);
}

// Times as the API gives them ("2026-01-01 12:00:03 UTC (3 min ago)"): the date small, the age beside it.
export function Time({value}) {
  if (!value) { return null; }
  const match = /^(.*) \((.*)\)$/.exec(value);
  if (!match) { return value; }
  return h(C.Box, {title: match[1], whiteSpace: "nowrap"}, h(C.Text, {as: "span"}, match[2]),
           h(C.Text, {as: "span", color: "fg.muted", fontSize: "xs", display: "block"}, match[1]));
}

export function Pager({offset, limit, shown, total, more, onPage, what}) {
  const end = offset + shown;
  const hasMore = more !== undefined ? more : end < total;
  return h(C.HStack, {gap: 2, mt: 2},
    h(C.Button, {size: "xs", variant: "outline", disabled: offset === 0,
                 onClick: () => onPage(Math.max(0, offset - limit))}, "Newer"),
    h(C.Button, {size: "xs", variant: "outline", disabled: !hasMore, onClick: () => onPage(offset + limit)}, "Older"),
    h(C.Text, {fontSize: "sm", color: "fg.muted"}, shown === 0 ? `no ${what}` :
      `${what} ${offset + 1}–${end}` + (total !== undefined ? ` of ${total}` : (hasMore ? ", more below" : ""))));
}

// Live refresh: the visible tab's data reloads on every tick of the view's clock (fast while anything is queued or
// working, or just after an action; slow otherwise) and at once after an action or a click on Refresh.
export const Live = React.createContext(null);

// Loads `load()` when `deps` change and on every refresh (`auto`: also on the clock's ticks). Keeps the last data
// while reloading; `busy` (data -> bool) tells the clock whether this data has work in progress.
export function useLive(load, deps, {auto = true, busy} = {}) {
  const live = React.useContext(Live);
  const key = React.useId();
  const [state, setState] = React.useState({data: null, error: null, loading: true});
  const tick = auto ? live.tick : live.manual;
  React.useEffect(() => {
    let gone = false;
    setState((old) => Object.assign({}, old, {loading: true}));
    load().then((data) => {
      if (gone) { return; }
      setState({data, error: null, loading: false});
      if (busy) { live.report(key, Boolean(busy(data))); }
      live.refreshed();
    }, (error) => { if (!gone) { setState((old) => ({data: old.data, error, loading: false})); } });
    return () => { gone = true; };
  }, deps.concat([tick, live.manual]));
  React.useEffect(() => () => live.report(key, false), []);
  return state;
}

export function Failure({error}) {
  if (!error) { return null; }
  return h(C.Alert.Root, {status: "error", my: 2},
    h(C.Alert.Indicator), h(C.Alert.Content, null, h(C.Alert.Description, null, error.message)));
}

// Asks before a destructive action: a modal alert dialog, the safe choice focused first, Escape cancels, and the
// focus returns to what opened it.
export function ConfirmDialog({open, title, body, confirmLabel, onConfirm, onCancel}) {
  const cancel = React.useRef(null);
  return h(C.Dialog.Root, {open, role: "alertdialog", initialFocusEl: () => cancel.current,
                           onOpenChange: (details) => { if (!details.open) { onCancel(); } }},
    h(C.Portal, null,
      h(C.Dialog.Backdrop),
      h(C.Dialog.Positioner, null,
        h(C.Dialog.Content, null,
          h(C.Dialog.Header, null, h(C.Dialog.Title, null, title)),
          h(C.Dialog.Body, null, h(C.Dialog.Description, null, body)),
          h(C.Dialog.Footer, null,
            h(C.Button, {ref: cancel, variant: "outline", onClick: onCancel}, "Cancel"),
            h(C.Button, {colorPalette: "red", onClick: onConfirm}, confirmLabel))))));
}
