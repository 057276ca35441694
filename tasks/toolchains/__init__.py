"""Toolchains: one folder per stack behind one interface (``base.Toolchain``), found through the
registry (``registry``); the mapping engine (``mapping``) and the run helpers the stacks share.

A stack knows its files (sources, kinds, tests, support files, where a new test goes), how to run
its tests with coverage in a sandbox (a CommandRunner it is given, never a process of its own),
lint with autocorrect, the static rubric's parser, the prompt context, the syntax check of a
patched file. Everything else asks the toolchain and never branches on the language.

May import: tasks.core, tasks.facts, tasks.keep (the hardened git, to list files), tasks.envs
(a stack's prepared environment is built by its own builder).
"""
