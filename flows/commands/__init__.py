"""One module per CLI command: the face of the CLI. A command parses its options, calls a flow
or one public function of a part, and renders the typed result it gets (a rich table, or
``--json`` from the result's pydantic model); it holds no report logic, no scout rule and no git.

May import: flows, judge.service, tasks.core, tasks.facts.reports.stream_json (the streamed
``parse --json``, beside the typed parser), tasks.toolchains.mapping, tasks.audit.report,
tasks.audit.run, tasks.generate.report, tasks.premerge.report, tasks.repair.state,
tasks.evaluate.table, tasks.history.trend, tasks.history.chart, tasks.history.db (for
`history`, the types it renders, the chart it writes, the store's one-line error).
"""
