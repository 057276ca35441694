"""Table names from model names."""

import inflection


def table_name(model: str) -> str:
    """`BlogPost` -> `blog_posts`."""
    return inflection.pluralize(inflection.underscore(model))
