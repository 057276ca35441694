"""`autopilot demo` (``make demo``): the nightly on the bundled Rails example, shown whole.

Without a model configured it runs against the scripted demo model (:mod:`flows.demo.model`), a
Mistral-compatible server on loopback whose replies were written for examples/rails_shop; with
``MISTRAL_API_KEY`` or ``AUTOPILOT_MODEL_URL`` set it runs the real model. The example is copied
into ``$AUTOPILOT_HOME/demo`` first: the checkout it ships in is never touched.

May import: tasks.core (the command that runs it lives in flows/commands/demo.py).
"""
