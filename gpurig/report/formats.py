"""The report's formats by name: the one list the renderer, click's choice and the node
contracts' own command line share (the last reads it before anything else loads)."""

FORMATS = ("table", "json", "junit", "markdown")
