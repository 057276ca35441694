# frozen_string_literal: true

# Base class of every model.
class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end
