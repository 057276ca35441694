"""What tools wrote, read as typed facts: test reports (JUnit XML in its dialects, RSpec JSON),
stack traces, coverage reports, and which test file ran which source lines (evidence).

Plain parsers of untrusted input: nothing here runs a process, asks a model or knows which
stack the project uses (a report's dialect is a format, not a stack).

May import: tasks.core.
"""
