"""Judge: the rubric, the static rubric checks and the LLM judge."""
