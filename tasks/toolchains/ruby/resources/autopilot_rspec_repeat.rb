# frozen_string_literal: true

# Run by Test Autopilot as `[bundle exec] ruby autopilot_rspec_repeat.rb RSPEC_ARGS...`: RSpec
# runs the given spec files several times in this one process, so the application (Rails) boots
# once for all of them. Between runs RSpec's world is reset and the spec files are loaded again
# (fresh example groups; a new seed when the project orders them at random); each run writes its
# own JSON report and a status file.
#
# Settings come from the environment the toolchain sets:
#   AUTOPILOT_REPEATS     how many runs (at least 1)
#   AUTOPILOT_REPEAT_DIR  where run N writes rspec-N.json and run-N.json ({"exit", "seconds"})
#
# The runs end after the first that does not exit 0 (a failure, a load error): later runs would
# only repeat it. The process exits with the first non-zero status.

require "json"
require "rspec/core"

module AutopilotRepeat
  def self.fresh_world!
    RSpec.clear_examples
    # clear_examples keeps the set of loaded files: without this the spec files would not be
    # loaded again and the next run would have no examples.
    RSpec.configuration.loaded_spec_files.clear
    RSpec.world.wants_to_quit = false
    RSpec.world.rspec_is_quitting = false if RSpec.world.respond_to?(:rspec_is_quitting=)
    RSpec.world.non_example_failure = false if RSpec.world.respond_to?(:non_example_failure=)
    reseed!
  end

  # A project that orders its examples at random gets a new order each run, as a new process
  # would (a seed the project forces with --seed stays: RSpec ignores the new one).
  def self.reseed!
    config = RSpec.configuration
    random = RSpec::Core::Ordering::Random
    return unless config.ordering_registry.fetch(:global).is_a?(random)

    config.seed = Random.new_seed % 0xFFFF
  end

  def self.run_once(args, dir, index)
    json = File.join(dir, "rspec-#{index}.json")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    code = RSpec::Core::Runner.run([*args, "--format", "progress", "--format", "json",
                                    "--out", json], $stderr, $stdout)
    seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    File.write(File.join(dir, "run-#{index}.json"), JSON.generate(exit: code, seconds: seconds))
    code
  end

  def self.main(args)
    runs = [Integer(ENV.fetch("AUTOPILOT_REPEATS", "1")), 1].max
    dir = ENV.fetch("AUTOPILOT_REPEAT_DIR")
    status = 0
    (1..runs).each do |index|
      fresh_world! if index > 1
      code = run_once(args, dir, index)
      $stdout.flush
      if code != 0
        status = code
        break
      end
    end
    status
  end
end

exit(AutopilotRepeat.main(ARGV.dup))
