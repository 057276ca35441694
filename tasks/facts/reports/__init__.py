"""Test reports: content-sniffed, streamed, normalised into TestCaseResult records.

``read`` is the typed entry (parse_reports, iter_records); ``stream`` turns one file into
batches of records (the fast path of ``autopilot parse`` writes them as JSON with
``json_out``, without pydantic); ``junit``, ``rspec`` and ``xmlin`` are the dialect parsers;
``cases`` and ``ids`` build the records and their ids.

May import: tasks.core, tasks.facts.
"""
