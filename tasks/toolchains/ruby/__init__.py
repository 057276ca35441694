"""ruby-rspec: RSpec (JSON report), SimpleCov, RuboCop, Rails file kinds and FactoryBot.

May import: tasks.core, tasks.facts, tasks.keep, tasks.toolchains (never another stack).
"""
