from words import table_name


def test_table_name() -> None:
    assert table_name("BlogPost") == "blog_posts"
