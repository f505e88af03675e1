"""JSON-schema patterns shared by the DAGs' Params (kept free of heavy imports: DAG files import it at parse time)."""

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
# key=value pairs separated by "/": no "..", no leading "/", no quotes, spaces or other SQL punctuation.
_PAIR = r"[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_:%+-]+(?:\.[A-Za-z0-9_:%+-]+)*"
PARTITION = rf"^(?!.*\.\.){_PAIR}(?:/{_PAIR})*$"
