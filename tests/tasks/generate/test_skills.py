"""Skills: front matter, examples that really parse, mission rules, exactly one skill per file."""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.core.types import SourceFile
from tasks.generate.skills import (
    SkillError,
    choose_skill,
    default_skills_dir,
    glob_match,
    load_skill,
    load_skills,
)
from tasks.toolchains import registry
from tasks.toolchains.node.syntax import syntax_ok as node_syntax_ok
from tests.paths import EXAMPLES

SKILL_FILES = sorted(p for p in default_skills_dir().glob("*.md") if p.name != "README.md")
EXPECTED = {
    "rails-model": "model",
    "rails-serializer": "serializer",
    "rails-request-spec": "controller",
    "rails-mailer": "mailer",
    "rails-helper": "helper",
    "ruby-plain": "ruby",
    "python-module": "python",
    "node-module": "node-module",
    "node-component": "node-component",
    "node-route": "node-route",
    "node-utility": "node-utility",
}
# Matchers the mission bans everywhere; an example spec must not teach them.
FORBIDDEN_IN_EXAMPLES = re.compile(
    r"be_present|be_truthy|be_falsey|be_between|include\(:\w+\)|not_to raise_error|"
    r"to_not raise_error|\.send\(|__send__|allow_any_instance_of|^\s*@\w+\s*=",
    re.MULTILINE,
)


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_all_skills_load_one_per_kind() -> None:
    skills = load_skills()
    assert {s.name: s.meta.kind for s in skills} == EXPECTED


@pytest.mark.parametrize("path", SKILL_FILES, ids=_ids(SKILL_FILES))
def test_front_matter_version_and_hash(path: Path) -> None:
    skill = load_skill(path)
    assert skill.name == path.stem
    assert re.fullmatch(r"\d+\.\d+\.\d+", skill.version)
    assert skill.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert skill.meta.description.startswith("Use for")
    assert not skill.body.startswith("---")  # the prompt gets the body, not the front matter
    for section in ("## Scope", "## Example", "## Critical rules"):
        assert section in skill.body


@pytest.mark.slow
@pytest.mark.parametrize("path", SKILL_FILES, ids=_ids(SKILL_FILES))
def test_examples_parse(path: Path, tmp_path: Path) -> None:
    skill = load_skill(path)
    examples = skill.examples()
    assert [lang for lang, _ in examples] == [skill.language]
    for i, (lang, code) in enumerate(examples):
        if lang == "python":
            ast.parse(code, filename=f"{path.name}#{i}")
        elif lang == "typescript":
            assert node_syntax_ok(code), f"{path.name}#{i}: does not parse"
        else:
            file = tmp_path / f"example_{i}.rb"
            file.write_text(code)
            proc = subprocess.run(
                ["ruby", "-c", str(file)], capture_output=True, text=True, timeout=60
            )
            assert proc.returncode == 0, f"{path.name}: {proc.stderr}"
            assert proc.stdout.strip() == "Syntax OK"


@pytest.mark.slow
def test_ruby_syntax_check_catches_missing_parenthesis(tmp_path: Path) -> None:
    # The check above must be able to fail: the mission's "missing parenthesis" spec.
    file = tmp_path / "broken_spec.rb"
    file.write_text(
        'RSpec.describe User do\n  it "x" do\n    expect(user.name.to eq("a")\n  end\nend\n'
    )
    proc = subprocess.run(["ruby", "-c", str(file)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0


@pytest.mark.parametrize("path", SKILL_FILES, ids=_ids(SKILL_FILES))
def test_examples_follow_the_rules_they_teach(path: Path) -> None:
    skill = load_skill(path)
    for lang, code in skill.examples():
        # (supertest's `.send(body)` is no Ruby `send`: the pattern is for Ruby and Python.)
        if lang != "typescript":
            assert FORBIDDEN_IN_EXAMPLES.search(code) is None, f"{path.name}: forbidden pattern"
        if lang == "ruby" and skill.meta.kind == "controller":
            # Through HTTP an error path is a status plus the exact error body.
            assert re.search(r'eq\("errors?" => ', code), "error path with exact message"
        elif lang == "ruby":
            assert "eq(" in code
            assert re.search(r"raise_error\(\w[\w:]*, \"", code), "error path with class+message"
        elif lang == "typescript":
            assert re.search(r"\.(toBe|toEqual|toStrictEqual)\(", code), "exact expectations"
            assert not re.search(r"\.(only|skip)\(|\btoThrow\(\)", code), "what it forbids"
        else:
            tree = ast.parse(code)
            raises = [
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "raises"
            ]
            assert raises
            assert all(any(k.arg == "match" for k in n.keywords) for n in raises)


@pytest.mark.parametrize("path", SKILL_FILES, ids=_ids(SKILL_FILES))
def test_critical_rules_from_the_mission(path: Path) -> None:
    skill = load_skill(path)
    rules = skill.body.split("## Critical rules", 1)[1]
    if skill.language == "ruby":
        for phrase in ("be_present", "be_truthy", "be_between", "include(:key)", "eq(exact_value)"):
            assert phrase in rules, phrase
        assert "spec/factories/<plural>.rb" in rules
        assert "great care" in rules
        assert "send" in rules
        assert "@" in rules  # let, never instance variables
        if skill.meta.kind != "controller":
            assert re.search(r"raise_error\(ExactClass, \"exact message\"\)", rules)
    elif skill.language == "typescript":
        for phrase in ("toBeTruthy", "snapshot", "jest.mock", ".only", "type-check"):
            assert phrase in rules, phrase
    else:
        for phrase in ("==", "pytest.raises(ExactError, match=", "parametrize", "_private"):
            assert phrase in rules, phrase


def test_request_spec_rules() -> None:
    rules = load_skill(default_skills_dir() / "rails-request-spec.md").body
    for phrase in (
        "Assert content, not just status",
        "JSON.parse(response.body)",
        "Exact error messages",
        "change { Model.count }.by(1)",
        "the record's",
        "every action",
        "Authorization on every action",
        "never instance variables",
        "index, show, create, update, destroy and every\n  custom action",
    ):
        assert phrase in rules, phrase


@pytest.mark.parametrize("kind", sorted(registry.kinds()))
def test_every_kind_maps_to_exactly_one_skill(kind: str) -> None:
    toolchain = registry.kinds()[kind]
    source = SourceFile(path="x/y.rb", kind=kind, toolchain=toolchain)
    assert choose_skill(source).meta.kind == kind
    assert choose_skill(source).language == registry.toolchain_class(toolchain).language


LOCATIONS = {
    "app/models/user.rb": "rails-model",
    "app/models/concerns/archivable.rb": "rails-model",
    "app/serializers/product_serializer.rb": "rails-serializer",
    "app/controllers/admin/users_controller.rb": "rails-request-spec",
    "app/controllers/api/orders_controller.rb": "rails-request-spec",
    "app/mailers/order_mailer.rb": "rails-mailer",
    "app/helpers/price_helper.rb": "rails-helper",
    "app/services/order_placer.rb": "ruby-plain",
    "app/jobs/cleanup_job.rb": "ruby-plain",
    "lib/x/y.rb": "ruby-plain",
    "lib/tasks.rb": "ruby-plain",
    "src/shop/pricing.py": "python-module",
    "shop/pricing.py": "python-module",
}


@pytest.mark.parametrize(("path", "expected"), LOCATIONS.items())
def test_choose_by_location(path: str, expected: str) -> None:
    skills = load_skills()
    assert choose_skill(path, skills=skills).name == expected
    # The globs are disjoint: no other skill claims the path.
    assert [s.name for s in skills if s.applies_to(path)] == [expected]


@pytest.mark.parametrize(
    "path", ["tests/test_pricing.py", "config/routes.rb", "README.md", "spec/models/u_spec.rb"]
)
def test_no_skill_is_an_error(path: str) -> None:
    with pytest.raises(SkillError, match=rf"^{re.escape(path)}: 0 skills apply"):
        choose_skill(path)


def test_several_skills_is_an_error() -> None:
    skills = load_skills()
    model = next(s for s in skills if s.name == "rails-model")
    twin = model.model_copy(update={"meta": model.meta.model_copy(update={"name": "twin"})})
    with pytest.raises(SkillError, match=r"2 skills apply by kind model"):
        choose_skill("app/models/user.rb", "model", skills=[*skills, twin])
    with pytest.raises(SkillError, match=r"2 skills apply by its location"):
        choose_skill("app/models/user.rb", skills=[*skills, twin])


def test_kind_is_authoritative_over_globs() -> None:
    # The mapping decides kinds by location; a path-only lookup agrees with it.
    assert choose_skill("app/services/x.rb", "ruby").name == "ruby-plain"
    assert choose_skill("app/models/user.rb", "model").name == "rails-model"


def test_writes_scope() -> None:
    by = {s.name: s for s in load_skills()}
    assert by["rails-model"].may_write("spec/models/user_spec.rb")
    assert by["rails-model"].may_write("spec/factories/users.rb")
    assert not by["rails-model"].may_write("app/models/user.rb")
    assert by["rails-request-spec"].may_write("spec/requests/admin/users_spec.rb")
    assert not by["rails-request-spec"].may_write("spec/models/user_spec.rb")
    assert by["ruby-plain"].may_write("spec/lib/x/y_spec.rb")
    assert by["python-module"].may_write("tests/test_pricing.py")
    assert not by["python-module"].may_write("src/shop/pricing.py")
    trees = [s for s in by.values() if s.language != "typescript"]
    assert all(w.startswith(("spec/", "tests/")) for s in trees for w in s.meta.writes), (
        "skills may only write under the test trees"
    )
    # Jest tests live beside their sources: only test files, by name or in __tests__/.
    colocated = [w for s in by.values() if s.language == "typescript" for w in s.meta.writes]
    assert colocated
    assert all(re.search(r"\.(test|spec)\.|__tests__/", w) for w in colocated)
    assert by["node-module"].may_write("src/orders.test.ts")
    assert not by["node-module"].may_write("src/orders.ts")


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("app/**/*.rb", "app/x.rb", True),
        ("app/**/*.rb", "app/a/b/x.rb", True),
        ("app/*.rb", "app/a/x.rb", False),
        ("**/*.py", "x.py", True),
        ("**/*.py", "a/b/x.pyc", False),
        ("app/models/**", "app/models/a/b.rb", True),
        ("spec/factories/*.rb", "spec/factories/users.rb", True),
        ("spec/factories/*.rb", "spec/factories/nested/users.rb", False),
        ("lib/?.rb", "lib/a.rb", True),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "skills"
    shutil.copytree(default_skills_dir(), target)
    return target


def test_hash_changes_with_text(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = {s.name: s.sha256 for s in load_skills(root)}
    file = root / "rails-model.md"
    file.write_text(file.read_text() + "\n- One more rule.\n")
    after = {s.name: s.sha256 for s in load_skills(root)}
    assert after["rails-model"] != before["rails-model"]
    assert {k: v for k, v in after.items() if k != "rails-model"} == {
        k: v for k, v in before.items() if k != "rails-model"
    }


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("kind: mailer", "kind: view"), r"rails-mailer.md: kind 'view' is no"),
        (lambda t: t.replace("name: rails-mailer", "name: mailer"), r"name is 'mailer'"),
        (lambda t: t.split("---\n", 2)[2], r"rails-mailer.md: does not start with"),
        (lambda t: t.replace("## Scope", "## Files"), r"missing section '## Scope'"),
        (lambda t: t.replace("```ruby", "```text"), r"no ```ruby example"),
        (lambda t: t.replace('version: "1.0.0"\n', ""), r"rails-mailer.md: invalid front"),
    ],
)
def test_broken_skill_fails_at_load(tmp_path: Path, edit: object, message: str) -> None:
    root = _copy(tmp_path)
    file = root / "rails-mailer.md"
    file.write_text(edit(file.read_text()))  # type: ignore[operator]
    with pytest.raises(SkillError, match=message):
        load_skills(root)


def test_kind_without_skill_fails_at_load(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "rails-helper.md").unlink()
    with pytest.raises(SkillError, match=r"kind helper: 0 skills"):
        load_skills(root)


@pytest.mark.parametrize("example", ["rails_shop", "py_inventory"])
def test_skills_agree_with_the_mapping_of_the_example_repos(example: str) -> None:
    # The mapping decides kinds by location; the skills' globs must agree with it, and every
    # spec the mapping expects or finds must be a file the chosen skill may write.
    from tasks.toolchains.mapping import map_repo

    skills = load_skills()
    mapping = map_repo(EXAMPLES / example)
    assert mapping.files
    for mapped in mapping.files:
        by_kind = choose_skill(mapped.source, mapped.kind, skills=skills)
        assert choose_skill(mapped.source, skills=skills).name == by_kind.name, mapped.source
        for spec in [mapped.expected_spec, *mapped.specs]:
            assert by_kind.may_write(spec), f"{by_kind.name} may not write {spec}"


def test_a_same_size_edit_is_seen(tmp_path: Path) -> None:
    """Loaded skills are kept between calls (every file task chooses one), but an edit that
    keeps the size is still read: the modification time is part of what is compared."""
    import os

    root = _copy(tmp_path)
    file = root / "rails-model.md"
    before = {s.name: s.sha256 for s in load_skills(root)}
    assert {s.name: s.sha256 for s in load_skills(root)} == before  # kept: same answer
    text = file.read_text()
    file.write_text(text[:-1] + ("?" if text.endswith("!") else "!"))  # same size
    st = file.stat()
    os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert len(file.read_text()) == len(text)
    after = {s.name: s.sha256 for s in load_skills(root)}
    assert after["rails-model"] != before["rails-model"]
