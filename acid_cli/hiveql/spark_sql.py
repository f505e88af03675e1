"""The statements `acid sql` runs on Spark (SELECT, INSERT ... SELECT, UPDATE, DELETE, MERGE), read with sqlglot.

sqlglot's Spark dialect (which extends its Hive dialect, so backquoted names, FROM-first queries, LATERAL VIEW and
`INSERT INTO TABLE t PARTITION (...)` parse as Spark parses them) gives the syntax tree: which statement it is, which
names are tables (`exp.Table` nodes, less the names of CTEs visible where they stand; never a column, an alias or the
`FROM` inside EXTRACT/TRIM), the target with its PARTITION spec and column list, and the clauses of UPDATE and MERGE.

What Spark runs is the user's own text, cut into the pieces `spark_jobs.write` takes (a query, a condition, an
expression) with only the table names replaced, not SQL generated from the tree: generating changes meaning, since
sqlglot reads `'it''s'` as two adjacent literals (Hive's rule: "its") where Spark reads one ("it's"), and it rewrites
functions and types (`to_timestamp(s)` becomes `CAST(s AS TIMESTAMP)`, `CAST(x AS VARCHAR(3))` becomes
`CAST(x AS STRING)`). sqlglot records source positions of identifiers only, so table names are replaced at their
identifiers' positions, and a clause's text runs between its keywords, found among sqlglot's tokens outside brackets
and CASE ... END and checked against the tree (same number of assignments, values and WHEN clauses).

Cost: time linear in the statement's length; pure (no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from acid_cli.hiveql.ast import (
    MergeDelete,
    MergeInsert,
    MergeUpdate,
    PartitionSpec,
    PartitionValue,
    SparkDelete,
    SparkInsert,
    SparkMerge,
    SparkQuery,
    SparkStatement,
    SparkText,
    SparkUpdate,
    TableName,
    TableRead,
    TableReference,
)
from acid_core.errors import UsageError
from acid_core.read.pruning import Predicate
from spark_jobs.pruning import expression_predicate, plain_strings

DIALECT = "spark"

_OPENING = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE})
_CLOSING = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END})
_NOT_KEYWORDS = frozenset({TokenType.STRING, TokenType.IDENTIFIER})
_BEFORE_ALIAS = ("version", "system_time", "sample")  # Spark's grammar puts these between a table's name and alias


class SparkSyntaxError(UsageError):
    """sqlglot's Spark dialect cannot parse a statement; `offset` is where, in the statement's text."""

    def __init__(self, detail: str, *, text: str, offset: int) -> None:
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1)
        super().__init__(f"Spark SQL syntax error at {line}:{column}: {detail}")
        self.detail = detail
        self.offset = offset


def parse_tree(text: str) -> exp.Expr:
    """sqlglot's syntax tree of one Spark SQL statement.

    Raises:
        SparkSyntaxError: sqlglot cannot parse it (the message says where and what it expected).
    """
    try:
        tree = sqlglot.parse_one(text, read=DIALECT)
    except ParseError as exc:
        error = exc.errors[0] if exc.errors else {}
        found = error.get("highlight") or ""
        lines = text.split("\n")
        line = min(max(int(error.get("line") or 1), 1), len(lines))
        column = max(int(error.get("col") or 0) - len(found), 0)  # sqlglot's col is where the found token ends
        offset = sum(len(previous) + 1 for previous in lines[:line - 1]) + column
        detail = _readable(str(error.get("description") or exc)) + (f", found '{found}'" if found else "")
        raise SparkSyntaxError(detail, text=text, offset=min(offset, len(text))) from None
    except TokenError as exc:
        raise SparkSyntaxError(f"cannot split into tokens ({exc})", text=text, offset=0) from None
    if isinstance(tree, exp.Command):  # sqlglot's fallback for statements its grammar does not cover
        raise SparkSyntaxError("sqlglot's Spark grammar does not cover this statement", text=text, offset=0)
    return tree


def _readable(description: str) -> str:
    """sqlglot's error description on one line, without Python reprs of its classes and tokens."""
    description = re.sub(r"Required keyword: '(\w+)' missing for <class '(?:[\w.]+\.)?(\w+)'>",
                         r"incomplete \2 (no \1)", description.splitlines()[0])
    description = re.sub(r"<Token token_type: TokenType\.SENTINEL\b[^>]*>", "end of input", description)
    return re.sub(r"<Token token_type: TokenType\.\w+, text: (.*?), line: [^>]*>", r"'\1'", description)


def parse_engine_statement(text: str) -> SparkStatement:
    """The parts of a SELECT, INSERT ... SELECT, UPDATE, DELETE or MERGE statement.

    Raises:
        SparkSyntaxError: sqlglot cannot parse the statement.
        UsageError: a statement of another kind, or a form `acid sql` does not run (named in the message).
    """
    tree = parse_tree(text)
    reader = _Reader(text, tree)
    if isinstance(tree, exp.Query):
        return SparkQuery(reader.piece((0, len(text))), reads=reader.reads())
    if isinstance(tree, exp.Insert):
        return reader.insert(tree)
    if isinstance(tree, exp.Update):
        return reader.update(tree)
    if isinstance(tree, exp.Delete):
        return reader.delete(tree)
    if isinstance(tree, exp.Merge):
        return reader.merge(tree)
    if isinstance(tree, exp.MultitableInserts):
        raise UsageError("Hive's multi-table insert (FROM source INSERT ... INSERT ...) is not supported: write one "
                         "INSERT INTO t SELECT ... FROM source per target")
    raise UsageError(f"{tree.key.upper()} statements are not run by acid sql's engine")


def _is_cte_reference(table: exp.Table) -> bool:
    """Whether a table name names a CTE visible where it stands: one of an enclosing WITH, or, inside a CTE, one
    defined before it (or itself, in WITH RECURSIVE), as Spark resolves them."""
    if table.args.get("db") or table.args.get("catalog"):
        return False
    name = table.name.lower()
    child, node = table, table.parent
    while node is not None:
        if isinstance(node, exp.With):
            position = next(i for i, cte in enumerate(node.expressions) if cte is child)
            visible = node.expressions[:position + 1 if node.args.get("recursive") else position]
            if any(cte.alias.lower() == name for cte in visible):
                return True
            child, node = node.parent, node.parent.parent if node.parent is not None else None
            continue
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With) and any(cte.alias.lower() == name for cte in with_.expressions):
            return True
        child, node = node, node.parent
    return False


def _read_predicate(table: exp.Table) -> Predicate | None:
    """What the WHERE of the query block that reads `table` directly (in its FROM or a JOIN) says of the rows it
    takes from it (`spark_jobs.pruning`): columns qualified by the table's alias (or name), unqualified ones too when
    it is the block's only source. Rows of the table that fail it are dropped by that WHERE whatever the joins (every
    comparison read there is false on NULL), so a view over the table needs no others. None anywhere else (a MERGE
    source, a table with column aliases, PIVOT or a sample)."""
    holder = table.parent
    if not isinstance(holder, (exp.From, exp.Join)) or not isinstance(holder.parent, exp.Select):
        return None
    select = holder.parent
    where = select.args.get("where")
    alias = table.args.get("alias")
    if where is None or (alias is not None and alias.columns) or table.args.get("pivots") or table.args.get("sample"):
        return None
    sources = 1 + sum(len(node.args.get(key) or []) for node in (select, table) for key in ("joins", "laterals"))
    return expression_predicate(where.this, qualifiers=(table.alias_or_name,), unqualified=sources == 1)


def _table_name(table: exp.Table, what: str) -> TableName:
    if not isinstance(table.this, exp.Identifier):
        raise UsageError(f"{what} must be a table name, not {table.sql(DIALECT)}")
    if table.args.get("catalog"):
        raise UsageError(f"{table.sql(DIALECT)}: a name with a catalog is not supported; write [db.]table")
    return TableName(table.name.lower(), database=table.db.lower() or None)


def _partition_value(key: str, value: exp.Expr) -> PartitionValue:
    if isinstance(value, exp.Literal):
        return PartitionValue(key, value.this, value.is_string)
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        return PartitionValue(key, "-" + value.this.this, False)
    raise UsageError(f"PARTITION ({key} = {value.sql(DIALECT)}): a partition value must be a literal")


def _column(node: exp.Expr, qualifiers: tuple[str, ...], what: str) -> str:
    """The lowercase name of an assigned column; a qualifier must name the target (its name or alias)."""
    if not isinstance(node, exp.Column) or node.args.get("db") or (node.table and node.table.lower() not in qualifiers):
        raise UsageError(f"{what} needs column = expression, not {node.sql(DIALECT)} = ...")
    return node.name.lower()


class _Reader:
    """One statement's text, its sqlglot tree and tokens: cuts the pieces Spark runs at clause keywords."""

    def __init__(self, text: str, tree: exp.Expr) -> None:
        self.text = text
        self.references: list[TableReference] = []
        self.tables: list[tuple[exp.Table, TableName]] = []
        for table in tree.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier) or _is_cte_reference(table):
                continue  # a table-valued function (range(10)) or a CTE
            name = _table_name(table, "a table")
            self.tables.append((table, name))
            parts = [table.args[key] for key in ("db", "this") if table.args.get(key)]
            if any("start" not in part.meta for part in parts):
                raise UsageError(f"cannot tell where table {name} is written")
            needs_alias = not table.alias and not any(table.args.get(key) for key in _BEFORE_ALIAS)
            self.references.append(TableReference(name, min(p.meta["start"] for p in parts),
                                                  max(p.meta["end"] for p in parts) + 1, needs_alias))

    def reads(self, target: exp.Table | None = None) -> tuple[TableRead, ...]:
        """Every table the statement reads (all it names but `target`, which it writes), each with what the WHERE of
        the query block reading it says of its rows; nothing at all when a string literal is not plainly written
        (sqlglot and Spark may read its value differently)."""
        plain = plain_strings(self.text, self.tokens)
        return tuple(TableRead(name, _read_predicate(table) if plain else None)
                     for table, name in self.tables if table is not target)

    # -- text and tokens --------------------------------------------------------------------------------------

    @cached_property
    def tokens(self) -> list[Token]:
        """sqlglot's tokens of the statement (a query needs none)."""
        return sqlglot.tokenize(self.text, read=DIALECT)

    def piece(self, *spans: tuple[int, int]) -> SparkText:
        """The text of `spans` (character ranges, in order) joined, with the tables read in them."""
        text, tables = "", []
        for start, end in spans:
            shift = len(text) - start
            tables += [TableReference(r.name, r.start + shift, r.end + shift, r.needs_alias) for r in self.references
                       if start <= r.start and r.end <= end]
            text += self.text[start:end]
        return SparkText(text, tuple(tables))

    def between(self, first: int, stop: int) -> SparkText:
        """The text of tokens first .. stop - 1."""
        if first >= stop:
            raise UsageError(f"expected an expression after {self.tokens[first - 1].text!r}")
        return self.piece((self.tokens[first].start, self.tokens[stop - 1].end + 1))

    def top_level(self, first: int, stop: int) -> Iterator[int]:
        """Indices in first .. stop - 1 of the tokens outside brackets and CASE ... END (from a top-level `first`)."""
        depth = 0
        for index in range(first, stop):
            kind = self.tokens[index].token_type
            if kind in _CLOSING:
                depth -= 1
            if depth == 0:
                yield index
            if kind in _OPENING:
                depth += 1

    def keyword(self, word: str, first: int, stop: int | None = None) -> int | None:
        """The index of the first top-level `word` (a keyword, not a string or quoted name) from `first`."""
        for index in self.top_level(first, len(self.tokens) if stop is None else stop):
            token = self.tokens[index]
            if token.token_type not in _NOT_KEYWORDS and token.text.upper() == word:
                return index
        return None

    def require(self, word: str, first: int, stop: int | None, what: str) -> int:
        index = self.keyword(word, first, stop)
        if index is None:
            raise UsageError(f"{what} needs {word}")
        return index

    def closing(self, index: int) -> int:
        """The index of the bracket closing the one at `index`."""
        return next(i for i in self.top_level(index, len(self.tokens)) if i > index)

    def split(self, first: int, stop: int, what: str) -> list[tuple[int, int]]:
        """Token ranges between the top-level commas of first .. stop - 1."""
        commas = [i for i in self.top_level(first, stop) if self.tokens[i].token_type is TokenType.COMMA]
        ranges = list(zip([first] + [c + 1 for c in commas], commas + [stop]))
        if any(start >= end for start, end in ranges):
            raise UsageError(f"{what}: an empty item in a list")
        return ranges

    def after_name(self, table: exp.Table) -> int:
        """The index of the first token after a table's name."""
        end = max(table.args[key].meta["end"] for key in ("db", "this") if table.args.get(key))
        return next((i for i, token in enumerate(self.tokens) if token.start > end), len(self.tokens))

    def assignments(self, nodes: list[exp.Expr], first: int, stop: int, qualifiers: tuple[str, ...],
                    what: str) -> tuple[tuple[str, SparkText], ...]:
        """`column = expression, ...` in tokens first .. stop - 1, one per EQ node of the tree."""
        items = self.split(first, stop, what) if nodes else []
        if not nodes or len(items) != len(nodes) or not all(isinstance(node, exp.EQ) for node in nodes):
            raise UsageError(f"{what} needs SET column = expression, ...")
        found = []
        for node, (start, end) in zip(nodes, items):
            equals = next(i for i in self.top_level(start, end) if self.tokens[i].token_type is TokenType.EQ)
            found.append((_column(node.this, qualifiers, what), self.between(equals + 1, end)))
        return tuple(found)

    # -- statements -------------------------------------------------------------------------------------------

    def insert(self, tree: exp.Insert) -> SparkInsert:
        if tree.args.get("overwrite"):
            raise UsageError("INSERT OVERWRITE is not supported (it would replace data wholesale; use DELETE and "
                             "INSERT in transactions)")
        if any(tree.args.get(key) for key in ("by_name", "where", "exists", "partition")):
            raise UsageError("INSERT INTO ... BY NAME, REPLACE WHERE and IF NOT EXISTS are not supported")
        target, columns = tree.this, ()
        if isinstance(target, exp.Schema):
            columns = tuple(column.name.lower() for column in target.expressions)
            target = target.this
        if not isinstance(target, exp.Table) or tree.expression is None:
            raise UsageError("INSERT INTO needs a table name and a query")
        table = _table_name(target, "INSERT INTO")
        static, dynamic = [], []
        partition = target.args.get("partition")
        index = self.after_name(target)
        if partition is not None:
            for item in partition.expressions:
                if isinstance(item, exp.EQ) and isinstance(item.this, exp.Column):
                    static.append(_partition_value(item.this.name.lower(), item.expression))
                elif isinstance(item, exp.Column):
                    dynamic.append(item.name.lower())
                else:
                    raise UsageError(f"PARTITION ({item.sql(DIALECT)}): expected key = literal or key")
            index = self.closing(index + 1) + 1  # PARTITION ( ... )
        if columns:
            index = self.closing(index) + 1
        if index >= len(self.tokens):
            raise UsageError("INSERT INTO needs a query")
        spans = [(self.tokens[index].start, len(self.text))]
        if tree.args.get("with_") is not None:  # WITH ... INSERT INTO t query: the CTEs belong to the query
            spans.insert(0, (0, self.tokens[self.require("INSERT", 0, None, "WITH ... INSERT")].start))
        return SparkInsert(table, self.piece(*spans), partition=PartitionSpec(tuple(static)) if static else None,
                           dynamic_keys=tuple(dynamic), columns=columns, reads=self.reads(target))

    def update(self, tree: exp.Update) -> SparkUpdate:
        if tree.this.alias:
            raise UsageError("UPDATE ... AS alias is not supported: name the columns without a qualifier")
        if any(tree.args.get(key) for key in ("from_", "joins", "order", "limit", "returning")):
            raise UsageError("UPDATE supports SET ... [WHERE ...] only (no FROM, ORDER BY, LIMIT or RETURNING)")
        table = _table_name(tree.this, "UPDATE")
        set_index = self.require("SET", self.after_name(tree.this), None, "UPDATE")
        where = self.keyword("WHERE", set_index)
        assignments = self.assignments(tree.expressions, set_index + 1, len(self.tokens) if where is None else where,
                                       (table.table,), "UPDATE")
        return SparkUpdate(table, assignments,
                           None if where is None else self.between(where + 1, len(self.tokens)),
                           reads=self.reads(tree.this))

    def delete(self, tree: exp.Delete) -> SparkDelete:
        if not isinstance(tree.this, exp.Table):
            raise UsageError("DELETE needs FROM table")
        if tree.this.alias:
            raise UsageError("DELETE FROM ... AS alias is not supported: name the columns without a qualifier")
        if any(tree.args.get(key) for key in ("using", "cluster", "order", "limit", "returning", "tables")):
            raise UsageError("DELETE supports FROM table [WHERE ...] only")
        where = self.keyword("WHERE", self.after_name(tree.this))
        return SparkDelete(_table_name(tree.this, "DELETE"),
                           None if where is None else self.between(where + 1, len(self.tokens)),
                           reads=self.reads(tree.this))

    def merge(self, tree: exp.Merge) -> SparkMerge:
        table = _table_name(tree.this, "MERGE INTO")
        target_alias = tree.this.alias.lower() or table.table
        using = tree.args.get("using")
        using_index = self.require("USING", self.after_name(tree.this), None, "MERGE")
        if isinstance(using, exp.Table):
            source = _table_name(using, "MERGE ... USING")
            source_alias = using.alias.lower() or source.table
            after_source = self.after_name(using)
        elif isinstance(using, exp.Subquery) and self.tokens[using_index + 1].token_type is TokenType.L_PAREN:
            close = self.closing(using_index + 1)
            source = self.between(using_index + 2, close)
            source_alias = using.alias.lower() or "s"
            after_source = close + 1
        else:
            raise UsageError("MERGE ... USING needs a table or a (query)")
        on = self.require("ON", after_source, None, "MERGE")
        whens = tree.args["whens"].expressions
        starts = [i for i in self.top_level(on, len(self.tokens)) if self.tokens[i].token_type is TokenType.WHEN]
        if len(starts) != len(whens):
            raise UsageError("cannot tell MERGE's WHEN clauses apart")
        clauses = [self.when(node, start, stop, (target_alias, table.table))
                   for node, start, stop in zip(whens, starts, starts[1:] + [len(self.tokens)])]
        kinds = [type(clause) for clause in clauses]
        if any(kinds.count(kind) > 1 for kind in kinds):
            raise UsageError("MERGE takes at most one WHEN MATCHED ... UPDATE, one WHEN MATCHED ... DELETE and one "
                             "WHEN NOT MATCHED ... INSERT clause")
        return SparkMerge(table, target_alias, source, source_alias, self.between(on + 1, starts[0]), tuple(clauses),
                          reads=self.reads(tree.this))

    def when(self, node: exp.When, first: int, stop: int,
             qualifiers: tuple[str, ...]) -> MergeUpdate | MergeDelete | MergeInsert:
        """One `WHEN [NOT] MATCHED [AND condition] THEN action` clause in tokens first .. stop - 1."""
        if node.args.get("source"):
            raise UsageError("WHEN NOT MATCHED BY SOURCE is not supported")
        then = self.require("THEN", first, stop, "WHEN")
        condition = None
        if node.args.get("condition") is not None:
            condition = self.between(self.require("AND", first, then, "WHEN ... condition") + 1, then)
        action = node.args.get("then")
        if node.args.get("matched"):
            if isinstance(action, exp.Update) and not any(isinstance(e, exp.Star) for e in action.expressions):
                set_index = self.require("SET", then, stop, "WHEN MATCHED THEN UPDATE")
                return MergeUpdate(self.assignments(action.expressions, set_index + 1, stop, qualifiers,
                                                    "WHEN MATCHED THEN UPDATE"), condition)
            if isinstance(action, exp.Var) and action.name.upper() == "DELETE":
                return MergeDelete(condition)
            raise UsageError("WHEN MATCHED needs THEN UPDATE SET column = expression, ... or THEN DELETE")
        values = action.expression if isinstance(action, exp.Insert) else None
        if not isinstance(values, exp.Tuple):
            raise UsageError("WHEN NOT MATCHED needs THEN INSERT [(column, ...)] VALUES (expression, ...)")
        columns = tuple(column.name.lower() for column in action.this.expressions) if action.this else ()
        open_index = self.require("VALUES", then, stop, "WHEN NOT MATCHED THEN INSERT") + 1
        items = self.split(open_index + 1, self.closing(open_index), "INSERT VALUES")
        if len(items) != len(values.expressions) or (columns and len(columns) != len(items)):
            raise UsageError(f"WHEN NOT MATCHED THEN INSERT gives {len(items)} values for {len(columns)} columns")
        return MergeInsert(tuple(self.between(start, end) for start, end in items), columns, condition)
