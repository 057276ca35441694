"""The node-jest toolchain: JavaScript and TypeScript tested with Jest.

Plain functions and classes, one module per concern:

- :mod:`~tasks.toolchains.node.tools`: node and the tools ``make setup`` installs (or the
  project's own ``node_modules``), and what the sandbox must show;
- :mod:`~tasks.toolchains.node.modules`: which ``node_modules`` a run uses (the setting, the
  tree's, the prepared environment's, the checkout's) and its link into the run's tree;
- :mod:`~tasks.toolchains.node.prepared` and :mod:`~tasks.toolchains.node.install_errors`: the
  prepared environment (``npm ci --ignore-scripts`` of the project's lock) and npm's failures;
- :mod:`~tasks.toolchains.node.layout`: sources, tests, the mapping, kinds, new test paths;
- :mod:`~tasks.toolchains.node.jest` and :mod:`~tasks.toolchains.node.run`: the Jest command
  (coverage, jest-junit) run through a command runner; :mod:`~tasks.toolchains.node.results`
  and :mod:`~tasks.toolchains.node.coverage` read what it wrote;
- :mod:`~tasks.toolchains.node.lint`: ESLint with the project's configuration or a default;
- :mod:`~tasks.toolchains.node.rubric`: the static rubric's findings for Jest test files;
- :mod:`~tasks.toolchains.node.patches`: syntax checks and manifest risk for repair patches;
- :mod:`~tasks.toolchains.node.files`, :mod:`~tasks.toolchains.node.diagnose`,
  :mod:`~tasks.toolchains.node.context`, :mod:`~tasks.toolchains.node.syntax`: the file rules,
  load errors, prompt context, syntax checks and mutations the interface asks for;
- :mod:`~tasks.toolchains.node.install`: the tools of an installed wheel, under the home;
- :mod:`~tasks.toolchains.node.toolchain`: the stack as a ``Toolchain``, registered as
  ``node-jest`` in ``tasks/toolchains/registry.py``.

May import: tasks.core, tasks.facts, tasks.keep, tasks.envs (its prepared environment),
tasks.toolchains (never another stack).
"""
