// The ACID view, a React app plugin of Airflow's UI (AcidViewPlugin.react_apps): Airflow imports this module, takes
// the component it leaves on globalThis.AirflowPlugin and renders it at /plugin/acid inside its own page.
// The tab, table and partition shown live in the URL (?tab=tables&table=db.t&partition=p), so every view is a link.

import {AFTER_ACTION_MS, AirflowLink, C, FAST_MS, Live, React, Router, SLOW_MS, StateBadge, airflow, h} from "./api.js";
import {CompactionsTab} from "./queue.js";
import {ChartsTab} from "./pictures.js";
import {TablesTab} from "./tables.js";
import {LocksTab, TransactionsTab} from "./txns.js";

const TABS = [
  ["compactions", "Compactions", CompactionsTab], ["tables", "Tables", TablesTab], ["charts", "Charts", ChartsTab],
  ["transactions", "Transactions", TransactionsTab], ["locks", "Locks", LocksTab],
];
const FINISHED_RUN = new Set(["success", "failed"]);

function useClock() {
  const [tick, setTick] = React.useState(0);
  const [manual, setManual] = React.useState(0);
  const [refreshedAt, setRefreshedAt] = React.useState(null);
  const [fast, setFast] = React.useState(false);
  const busy = React.useRef(new Map());
  const actedUntil = React.useRef(0);
  const timer = React.useRef(null);
  const schedule = React.useRef(null);
  schedule.current = () => {
    clearTimeout(timer.current);
    const now = Date.now();
    const quick = [...busy.current.values()].some(Boolean) || now < actedUntil.current;
    setFast(quick);
    timer.current = setTimeout(() => {
      if (document.visibilityState === "visible") { setTick((value) => value + 1); }
      schedule.current();
    }, quick ? FAST_MS : SLOW_MS);
  };
  React.useEffect(() => { schedule.current(); return () => clearTimeout(timer.current); }, []);
  return React.useMemo(() => ({
    tick, manual, refreshedAt, fast,
    refreshed: () => setRefreshedAt(new Date()),
    report: (key, isBusy) => {
      const was = [...busy.current.values()].some(Boolean);
      if (isBusy) { busy.current.set(key, true); } else { busy.current.delete(key); }
      if (was !== [...busy.current.values()].some(Boolean)) { schedule.current(); }
    },
    refresh: () => setManual((value) => value + 1),
    acted: () => { actedUntil.current = Date.now() + AFTER_ACTION_MS; setManual((value) => value + 1); schedule.current(); },
  }), [tick, manual, refreshedAt, fast]);
}

function clockTime(date) {
  return date ? date.toISOString().slice(11, 19) + " UTC" : "not yet";
}

// What the last action did: its words, its DAG run (a link to the run's page, with the run's state, followed until
// it ends) or its error.
function Notice({notice, live}) {
  const [runState, setRunState] = React.useState(null);
  const run = notice && notice.run;
  React.useEffect(() => {
    setRunState(null);
    if (!run) { return undefined; }
    let gone = false;
    let timer = null;
    const poll = () => airflow(`dags/${encodeURIComponent(run.dag_id)}/dagRuns/${encodeURIComponent(run.run_id)}`)
      .then((found) => {
        if (gone) { return; }
        setRunState(found.state);
        if (!FINISHED_RUN.has(found.state)) { timer = setTimeout(poll, FAST_MS); } else { live.refresh(); }
      }, () => { if (!gone) { timer = setTimeout(poll, FAST_MS); } });
    poll();
    return () => { gone = true; clearTimeout(timer); };
  }, [run && run.run_id]);
  if (!notice) { return h(C.Box, {id: "message", role: "status", minH: "0"}); }
  return h(C.Alert.Root, {id: "message", role: "status", status: notice.status, my: 2, size: "sm"},
    h(C.Alert.Indicator),
    h(C.Alert.Content, null, h(C.Alert.Description, null,
      h(C.Text, {as: "span"}, notice.text),
      run ? h(C.Text, {as: "span"}, " (run ", h(AirflowLink, {to: run.url, "data-testid": "run-link"}, run.run_id),
              ")") : null,
      run && runState ? h(C.Box, {as: "span", ml: 2}, h(StateBadge, {state: runState})) : null)));
}

function AcidView() {
  const live = useClock();
  const [params, setParams] = Router.useSearchParams();
  const [notice, setNotice] = React.useState(null);
  const tab = TABS.some(([name]) => name === params.get("tab")) ? params.get("tab") : "compactions";
  const go = React.useCallback((changes) => setParams((old) => {
    const next = new URLSearchParams(old);
    for (const [key, value] of Object.entries(changes)) {
      if (value === null || value === undefined || value === "") { next.delete(key); } else { next.set(key, value); }
    }
    return next;
  }), [setParams]);
  // An action's outcome: its notice, and the visible tab reloaded now and then quickly for a while.
  const say = React.useCallback((status, text, run) => {
    setNotice({status, text, run: run || null, at: Date.now()});
    if (status !== "error") { live.acted(); }
  }, [live.acted]);
  const context = Object.assign({}, live, {go, say, params});
  return h(Live.Provider, {value: context},
    h(C.Box, {p: 2, "data-testid": "acid-view"},
      h(C.Flex, {justify: "space-between", align: "flex-start", gap: 4, wrap: "wrap"},
        h(C.Box, null,
          h(C.Heading, {size: "lg"}, "ACID"),
          h(C.Text, {color: "fg.muted", fontSize: "sm"},
            "Compactions, table health, transactions and locks of the acid_metastore connection")),
        h(C.HStack, {gap: 3},
          h(C.Text, {id: "refreshed", fontSize: "sm", color: "fg.muted", title: live.fast
            ? "every 5 s while a compaction is queued or working, and for 2 min after an action"
            : "every 30 s while nothing is queued or working"},
            `Last refreshed ${clockTime(live.refreshedAt)} · ${live.fast ? "every 5 s" : "every 30 s"}`),
          h(C.Button, {size: "sm", variant: "outline", onClick: live.refresh}, "Refresh"))),
      h(Notice, {notice, live}),
      // a tab's trigger always opens the tab's first page (the Tables tab: the list, even from a table's page)
      h(C.Tabs.Root, {value: tab, lazyMount: true, unmountOnExit: true, variant: "line", mt: 2},
        h(C.Tabs.List, null, TABS.map(([name, label]) => h(C.Tabs.Trigger, {
          key: name, value: name, onClick: () => go({tab: name, table: null, partition: null})}, label))),
        TABS.map(([name, , Tab]) => h(C.Tabs.Content, {key: name, value: name}, h(Tab, null))))));
}

globalThis.AirflowPlugin = AcidView;
export default AcidView;
