"""The model: the Mistral client (transport retries, re-asks, records), the messages it sends,
the prompt templates, and the reply formats (schemas and parsers).

May import: tasks.core.
"""
