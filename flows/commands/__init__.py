"""One module per CLI command: the CLI layer (printing, exit codes) over tasks/ and flows/."""
