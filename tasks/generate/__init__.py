"""The nightly's per-file work: targets, skill, prompt context, generate -> lint -> run -> fix,
the gates in order, the outcome store, the report and the archive of every exchange.

May import: tasks.core, tasks.facts, tasks.toolchains, tasks.sandbox, tasks.keep, tasks.model,
tasks.audit, judge, tasks.scale (what a file job carries of its run).
"""
