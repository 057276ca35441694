# frozen_string_literal: true

# Loaded by Test Autopilot with RUBYOPT=-r<this file> before RSpec and the application, so
# SimpleCov measures coverage even when the project's spec helper never starts it.
#
# Settings come from the environment the toolchain sets:
#   AUTOPILOT_COVERAGE_DIR   coverage directory, relative to the project root
#   AUTOPILOT_COVERAGE_NAME  SimpleCov command name (unique per run)
#   AUTOPILOT_TRACK_FILES    glob of source files reported even when never loaded
#
# When the project's own helper calls SimpleCov.start again, that call only applies its
# configuration: Coverage is not restarted (Ruby refuses a second Coverage.start), and our
# directory, name, filters and "no minimum coverage" are enforced again afterwards, so a
# project's `minimum_coverage 90` can never turn a passing spec into a failing run.

begin
  require "simplecov"
rescue LoadError => e
  warn("autopilot: SimpleCov is not available (#{e.message}); no coverage for this run")
else
  module AutopilotSimpleCov
    NON_SOURCE = %r{\A/(spec|test|features|config|db|vendor|tmp|log|coverage|bin|\.[^/]+)/}.freeze

    def self.enforce!
      # Branch coverage beside lines (SimpleCov 0.18+), read by the toolchain where present.
      SimpleCov.enable_coverage(:branch) if SimpleCov.respond_to?(:enable_coverage) && !running?
      SimpleCov.coverage_dir(ENV.fetch("AUTOPILOT_COVERAGE_DIR", "coverage"))
      SimpleCov.command_name(ENV.fetch("AUTOPILOT_COVERAGE_NAME", "autopilot-#{Process.pid}"))
      track = ENV.fetch("AUTOPILOT_TRACK_FILES", "{app,lib}/**/*.rb")
      SimpleCov.track_files(track)
      SimpleCov.instance_variable_set(:@minimum_coverage, {})
      SimpleCov.instance_variable_set(:@minimum_coverage_by_file, {})
      SimpleCov.instance_variable_set(:@maximum_coverage_drop, {})
      SimpleCov.instance_variable_set(:@filters, [])
      SimpleCov.add_filter { |src| !src.filename.start_with?("#{SimpleCov.root}/") }
      SimpleCov.add_filter { |src| NON_SOURCE.match?(src.filename.delete_prefix(SimpleCov.root)) }
      SimpleCov.formatter(NullFormatter)
      SimpleCov.print_error_status = false
    end

    def self.running?
      SimpleCov.respond_to?(:running) && SimpleCov.running
    end

    # The resultset is all the toolchain reads: skip the HTML report.
    class NullFormatter
      def format(_result); end
    end

    # Makes a second SimpleCov.start (from the project's spec helper) configuration-only.
    module StartOnce
      def start(profile = nil, &block)
        return super unless running

        load_profile(profile) if profile
        configure(&block) if block
        AutopilotSimpleCov.enforce!
      end
    end
  end

  SimpleCov.singleton_class.prepend(AutopilotSimpleCov::StartOnce)
  SimpleCov.start { AutopilotSimpleCov.enforce! }
end
