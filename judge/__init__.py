"""Judge: the rubric (rubric.md, the single source of the scoring levels), the static rubric
(rules and scoring; each toolchain parses its own test files), the LLM judge, the labelled
calibration cases, and judging a spec end to end (service).

May import: tasks.core, tasks.toolchains, tasks.model, tasks.sandbox, tasks.keep.
"""
