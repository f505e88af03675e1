// The Transactions tab (SHOW TRANSACTIONS: open ones first, filtered by state, paged) and the Locks tab (SHOW LOCKS).

import {C, Cell, DataTable, Empty, Failure, Pager, React, StateBadge, Time, call, h, query, text, useLive} from "./api.js";

const PAGE = 50;

export function TransactionsTab() {
  const [state, setState] = React.useState("");
  const [offset, setOffset] = React.useState(0);
  const {data, error} = useLive(() => call("transactions?" + query({state, offset, limit: PAGE})), [state, offset]);
  const choose = (value) => { setState(value); setOffset(0); };
  const counts = data ? {"": data.open + data.aborted, open: data.open, aborted: data.aborted} : {};
  return h(C.Stack, {gap: 3},
    h(C.HStack, {gap: 2},
      h(C.Text, {fontSize: "sm"}, "Show"),
      h(C.NativeSelect.Root, {size: "sm", width: "16em"},
        h(C.NativeSelect.Field, {name: "state", value: state, onChange: (e) => choose(e.target.value),
                                 "aria-label": "transaction state"},
          [["", "open, then aborted"], ["open", "open"], ["aborted", "aborted"]].map(([value, label]) =>
            h("option", {key: value, value}, data ? `${label} (${counts[value]})` : label))),
        h(C.NativeSelect.Indicator))),
    h(Failure, {error}),
    data && data.transactions.length === 0
      ? h(Empty, {title: state === "aborted" ? "No aborted transactions" : state === "open" ? "No open transactions"
                                              : "No open or aborted transactions"},
          "Committed transactions are not listed (SHOW TRANSACTIONS shows open and aborted ones).")
      : h(DataTable, {id: "txn-table", caption: "Transactions",
                      columns: ["Transaction", "State", "Started", "Last heartbeat", "User", "Host", "Agent info"],
                      rows: (data ? data.transactions : []).map((t) => h(C.Table.Row, {key: t.txn_id,
                                                                                       "data-txn": t.txn_id},
                        h(Cell, null, t.txn_id), h(Cell, null, h(StateBadge, {state: t.state})),
                        h(Cell, null, h(Time, {value: t.started})), h(Cell, null, h(Time, {value: t.last_heartbeat})),
                        h(Cell, null, t.user), h(Cell, null, t.host), h(Cell, null, text(t.agent_info))))}),
    data && data.total > 0 ? h(Pager, {offset, limit: PAGE, shown: data.transactions.length, total: data.total,
                                       onPage: setOffset, what: "transactions"}) : null);
}

export function LocksTab() {
  const {data, error} = useLive(() => call("locks"), []);
  return h(C.Stack, {gap: 3},
    h(Failure, {error}),
    data && data.locks.length === 0
      ? h(Empty, {title: "No locks held"}, "Nothing is reading or writing a table under a lock right now.")
      : h(DataTable, {id: "lock-table", caption: "Locks",
                      columns: ["Lock ID", "Database", "Table", "Partition", "State", "Blocked By", "Type",
                                "Transaction ID", "Last Heartbeat", "Acquired At", "User", "Hostname", "Agent Info"],
                      rows: (data ? data.locks : []).map((l) => h(C.Table.Row, {key: `${l.lock_id}-${text(l.partition)}`},
                        h(Cell, null, l.lock_id), h(Cell, null, l.database), h(Cell, null, text(l.table)),
                        h(Cell, null, text(l.partition)), h(Cell, null, h(StateBadge, {state: l.state})),
                        h(Cell, null, text(l.blocked_by)), h(Cell, null, l.type), h(Cell, null, text(l.txn_id)),
                        h(Cell, null, h(Time, {value: l.last_heartbeat})), h(Cell, null, h(Time, {value: l.acquired_at})),
                        h(Cell, null, l.user), h(Cell, null, l.host), h(Cell, null, text(l.agent_info))))}));
}
