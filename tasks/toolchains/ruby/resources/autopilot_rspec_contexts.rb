# frozen_string_literal: true

# Loaded by Test Autopilot with `rspec --require <this file>` when a suite run must also tell
# which spec file ran which source lines (the evidence that maps specs to sources whatever
# their names). After each top-level example group, the lines whose hit counts grew since the
# previous group are credited to that group's spec file (Coverage.peek_result deltas: one
# snapshot per spec file, cheap next to the examples themselves). Sources outside the project,
# and the project's spec/ and vendor/ trees, are left out.
#
#   AUTOPILOT_CONTEXTS_FILE  where the JSON {spec file => {source => [line, ...]}} is written

require "coverage"
require "json"

module AutopilotContexts
  SKIP = %r{/(spec|vendor|\.autopilot-tmp)/}.freeze

  class << self
    def start
      @root = "#{Dir.pwd}/"
      @by_spec = Hash.new { |hash, key| hash[key] = Hash.new { |h, k| h[k] = [] } }
      @last = snapshot
    end

    def running?
      Coverage.respond_to?(:running?) ? Coverage.running? : true
    end

    def snapshot
      return {} unless running?

      Coverage.peek_result.each_with_object({}) do |(file, data), out|
        next unless file.start_with?(@root) && !SKIP.match?(file.delete_prefix(@root[0..-2]))

        lines = data.is_a?(Hash) ? data[:lines] : data
        out[file] = lines.dup if lines
      end
    rescue RuntimeError
      {}
    end

    def record(spec)
      return if @last.nil?

      now = snapshot
      now.each do |file, lines|
        before = @last[file] || []
        lines.each_with_index do |count, index|
          @by_spec[spec][file] << (index + 1) if count && count > (before[index] || 0)
        end
      end
      @last = now
    end

    def write
      out = ENV.fetch("AUTOPILOT_CONTEXTS_FILE", nil)
      return if out.nil? || @by_spec.nil?

      File.write(out, JSON.generate(@by_spec.transform_values { |f| f.transform_values(&:uniq) }))
    end
  end
end

RSpec.configure do |config|
  config.before(:suite) { AutopilotContexts.start }
  config.after(:context) do
    group = self.class
    AutopilotContexts.record(group.metadata[:file_path].to_s) if group.top_level?
  end
  config.after(:suite) { AutopilotContexts.write }
end
