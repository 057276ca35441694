"""ruby-rspec: RSpec (JSON report), SimpleCov, RuboCop, Rails file kinds and FactoryBot.

May import: tasks.core, tasks.facts, tasks.keep, tasks.envs (its prepared environment),
tasks.toolchains (never another stack).
Imported only by: tasks.toolchains.registry (everything else asks the interface).
"""
