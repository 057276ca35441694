# frozen_string_literal: true

require "mkmf"
abort "autopilot_missing_lib.h is missing" unless have_header("autopilot_missing_lib.h")
create_makefile("needs_header/needs_header")
