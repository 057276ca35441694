"""Tasks: Prefect tasks and the plain functions behind them.

Nothing here reads settings or opens files at import time.
"""
