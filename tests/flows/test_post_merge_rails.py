"""End-to-end on the Rails example: two regressions merged at once, three failure groups.

A helper change breaks its own spec and a request spec (one cause, two signatures); a model
change breaks a model spec. The report is a real RSpec JSON run; the auditor re-runs RSpec in the
sandbox; the fixes land on one branch with one commit per distinct fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import SubprocessRunner, git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import is_surgeon

pytestmark = pytest.mark.slow

HELPER = "app/helpers/price_helper.rb"
PRODUCT = "app/models/product.rb"

HELPER_FIX = f"""```diff
--- a/{HELPER}
+++ b/{HELPER}
@@ -9,3 +9,3 @@
     units, rest = cents.abs.divmod(100)
-    "#{{sign}}#{{units}}.#{{rest.to_s.rjust(3, '0')}} #{{currency}}"
+    "#{{sign}}#{{units}}.#{{rest.to_s.rjust(2, '0')}} #{{currency}}"
   end
```
"""
PRODUCT_FIX = (
    f"```diff\n--- a/{PRODUCT}\n+++ b/{PRODUCT}\n@@ -24,3 +24,3 @@\n"
    " \n"  # the blank context line: a single space
    "-    update!(stock: stock - quantity - 1)\n"
    "+    update!(stock: stock - quantity)\n"
    "   end\n```\n"
)


def diagnosis(path: str, cause: str) -> str:
    block = {"file_path": path, "start_line": 1, "end_line": 30, "description": cause}
    return json.dumps(
        {
            "root_cause": cause,
            "affected_code_blocks": [block],
            "repair_strategy": "Revert the merged change.",
            "confidence": 0.9,
            "wrong_side": "code",
            "alternatives": [{"root_cause": "x", "repair_strategy": "y", "confidence": 0.1}],
        }
    )


def test_two_regressions_three_groups_fixed_on_one_branch(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    from flows.post_merge import post_merge

    repo = make_example_repo("rails_shop", tmp_path / "shop")
    helper, product = repo / HELPER, repo / PRODUCT
    helper.write_text(helper.read_text().replace("rjust(2, '0')", "rjust(3, '0')"))
    product.write_text(product.read_text().replace("stock - quantity)", "stock - quantity - 1)"))
    git(repo, "commit", "-qam", "Merge: pad cents, reserve a spare")
    head = git(repo, "rev-parse", "HEAD").strip()
    reports = tmp_path / "reports"
    get_toolchain("ruby-rspec").run_suite(repo, SubprocessRunner(), reports_dir=reports)

    helper_cause = "format_price pads cents to three digits since the merge"
    for spec in ("spec/helpers/price_helper_spec.rb", "spec/requests/api/products_spec.rb"):
        mistral_server.add(
            Rule(
                schema_name="diagnosis",
                contains=f"failures in `{spec}`",
                replies=[diagnosis(HELPER, helper_cause)],
            )
        )
        mistral_server.add(
            Rule(
                when=lambda r, s=spec: is_surgeon(r) and f"failure in `{s}`" in r.text,  # type: ignore[misc]
                replies=[HELPER_FIX],
            )
        )
    mistral_server.add(
        Rule(
            schema_name="diagnosis",
            contains="failures in `spec/models/product_spec.rb`",
            replies=[diagnosis(PRODUCT, "reserve! takes one unit too many")],
        )
    )
    mistral_server.add(
        Rule(
            when=lambda r: is_surgeon(r) and "spec/models/product_spec.rb" in r.text,
            replies=[PRODUCT_FIX],
        )
    )

    result = post_merge(
        repo=str(repo),
        reports=[str(reports / "rspec.json")],
        archive=str(tmp_path / "archive"),
        human_timeout=0,
    ).model_dump(mode="json")

    assert mistral_server.unmatched == []
    groups = {g["tests"][0].split("[")[0]: g for g in result["groups"]}
    assert set(groups) == {
        "spec/helpers/price_helper_spec.rb",
        "spec/requests/api/products_spec.rb",
        "spec/models/product_spec.rb",
    }
    assert len(groups["spec/helpers/price_helper_spec.rb"]["tests"]) == 2  # one group, 2 tests
    assert all(g["outcome"] == "fixed" for g in result["groups"]), result["groups"]
    branch = result["branch"]
    assert branch == f"autopilot/fix-{head[:7]}"
    log = git(repo, "log", "--format=%s", f"{head}..{branch}").splitlines()
    assert len(log) == 2  # the shared helper fix is committed once
    assert "rjust(2, '0')" in git(repo, "show", f"{branch}:{HELPER}")
    assert "stock - quantity)" in git(repo, "show", f"{branch}:{PRODUCT}")
    assert any(
        "already part of an earlier fix" in r for g in result["groups"] for r in g["reasons"]
    )
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "status", "--porcelain") == ""
    assert result["metrics"]["autonomous_fix_rate"] == 1.0
