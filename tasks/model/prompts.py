"""Prompt templates: loading, validation and rendering.

A prompt is a Jinja2 template ``prompts/<name>.md.j2`` that starts with a YAML front matter::

    ---
    name: generate            # must equal the file name without .md.j2
    version: "1.0.0"
    role: generator           # generator | diagnostician | surgeon | judge | scout
    reply: files              # files | diff | diagnosis | judge_verdict | scout_failures
    description: One line saying what the prompt is for.
    variables: [path, source, ...]   # exactly the variables the body uses
    ---

The body defines exactly two blocks, ``{% block system %}`` and ``{% block user %}``: they become
the system and the user message. Shared text lives in partials (``prompts/_*.md.j2``, no front
matter, macros only) imported inside each block. Templates render with ``StrictUndefined``: a
missing variable is an error, never an empty string. The sha256 of a prompt covers its file and
every partial it imports, so a change to a shared part changes the hash (and the cache keys) of
every prompt using it.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import jinja2
import jinja2.meta
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.core.errors import ConfigError
from tasks.core.resources import resource_path
from tasks.core.types import PromptMeta
from tasks.model.messages import Role

logger = logging.getLogger(__name__)

SUFFIX = ".md.j2"
ReplyKind = Literal["files", "diff", "diagnosis", "judge_verdict", "scout_failures"]
#: The prompts the pipeline needs; validate_all() fails when one is missing.
REQUIRED_PROMPTS = ("generate", "fix", "diagnose", "surgeon", "judge", "scout")
_BLOCKS = {"system", "user"}
_FRONT_MATTER = re.compile(r"\A---\n(.*?\n)---\n", re.DOTALL)


class PromptError(ConfigError):
    """A prompt template is broken, or was rendered with wrong variables."""


def default_prompts_dir() -> Path:
    """The prompts/ directory shipped with Autopilot (the checkout's, or the wheel's copy)."""
    return resource_path("prompts")


class PromptHeader(BaseModel):
    """The front matter every prompt template starts with."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: str = Field(min_length=1)
    role: Role
    reply: ReplyKind
    description: str = Field(min_length=1)
    variables: list[str]


class PromptTemplate(PromptHeader):
    """A loaded prompt: its header, full file text and content hash."""

    text: str
    sha256: str
    path: Path

    @property
    def meta(self) -> PromptMeta:
        """The name, version and hash to record with every call."""
        return PromptMeta(name=self.name, version=self.version, sha256=self.sha256)


class RenderedPrompt(BaseModel):
    """A rendered prompt: the system and the user message."""

    meta: PromptMeta
    system: str
    user: str

    def messages(self) -> list[dict[str, str]]:
        """The chat messages in the shape the Mistral SDK accepts."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ]


def _split_front_matter(text: str) -> tuple[str | None, str]:
    """Return (front matter, body); the body keeps blank lines so Jinja line numbers match."""
    m = _FRONT_MATTER.match(text)
    if m is None:
        return None, text
    return m.group(1), "\n" * m.group(0).count("\n") + text[m.end() :]


class _Loader(jinja2.FileSystemLoader):
    """File loader that hides the front matter from Jinja.

    A cached partial counts as up to date only while the file's content is unchanged (not its
    mtime, which can stay equal across quick edits), so a render never uses stale text whose
    replacement is already part of the prompt's hash.
    """

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        source, filename, _ = super().get_source(environment, template)

        def uptodate() -> bool:
            try:
                return Path(filename).read_text(encoding="utf-8") == source
            except OSError:
                return False

        return _split_front_matter(source)[1], filename, uptodate


def fenced(text: str, lang: str = "") -> str:
    """Wrap text in a code fence longer than any backtick run inside it (Jinja filter).

    Untrusted text containing ``` must not be able to close the fence early and pose as
    prompt instructions.
    """
    text = str(text)  # a StrictUndefined raises here, naming the missing variable
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip(chr(10))}\n{fence}"


_envs: dict[Path, jinja2.Environment] = {}
_asts: dict[str, Any] = {}
_compiled: dict[tuple[Path, str], jinja2.Template] = {}
_lock = threading.Lock()


def _environment(directory: Path) -> jinja2.Environment:
    with _lock:
        env = _envs.get(directory)
        if env is None:
            env = jinja2.Environment(
                loader=_Loader(str(directory)),
                undefined=jinja2.StrictUndefined,
                autoescape=False,
                keep_trailing_newline=True,
                trim_blocks=True,
                lstrip_blocks=True,
                auto_reload=True,
            )
            env.filters["fenced"] = fenced
            _envs[directory] = env
        return env


def _parse(env: jinja2.Environment, text: str) -> Any:
    """Parse a template body once per distinct text (parsing is the slow part of validation)."""
    key = hashlib.sha256(text.encode()).hexdigest()
    with _lock:
        ast = _asts.get(key)
    if ast is None:
        ast = env.parse(text)
        with _lock:
            _asts[key] = ast
    return ast


def _resolve_dir(directory: Path | None) -> Path:
    return (directory or default_prompts_dir()).resolve()


def _hash_with_partials(env: jinja2.Environment, directory: Path, name: str, text: str) -> str:
    """sha256 over the template text and, recursively, every template it references."""
    digest = hashlib.sha256(text.encode())
    seen: set[str] = set()
    pending = [text]
    while pending:
        try:
            ast = _parse(env, _split_front_matter(pending.pop())[1])
        except jinja2.TemplateSyntaxError as exc:
            where = exc.name or name
            raise PromptError(f"prompt {where}: line {exc.lineno}: {exc.message}") from exc
        for ref in sorted(r for r in jinja2.meta.find_referenced_templates(ast) if r):
            if ref in seen:
                continue
            seen.add(ref)
            try:
                ref_text = (directory / ref).read_text(encoding="utf-8")
            except OSError as exc:
                raise PromptError(f"prompt {name}: partial {ref}: {exc.strerror}") from exc
            digest.update(f"\0{ref}\0".encode() + ref_text.encode())
            pending.append(ref_text)
    return digest.hexdigest()


def load_prompt(name: str, directory: Path | None = None) -> PromptTemplate:
    """Load one prompt template and check its front matter and syntax.

    Args:
        name: The prompt's name (file ``<name>.md.j2``).
        directory: The prompts directory; the repository's prompts/ by default.

    Returns:
        The template with its header, text and sha256.

    Raises:
        PromptError: The file is missing, has no valid front matter, or does not compile.
    """
    root = _resolve_dir(directory)
    path = root / f"{name}{SUFFIX}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"prompt {name}: cannot read {path}: {exc.strerror}") from exc
    header_text, body = _split_front_matter(text)
    if header_text is None:
        raise PromptError(f"prompt {name}: {path.name} does not start with a --- front matter")
    try:
        header = PromptHeader.model_validate(yaml.safe_load(header_text))
    except (yaml.YAMLError, ValidationError) as exc:
        first = str(exc).replace("\n", " ")
        raise PromptError(f"prompt {name}: invalid front matter: {first}") from exc
    if header.name != name:
        raise PromptError(f"prompt {name}: front matter name is {header.name!r}")
    env = _environment(root)
    sha = _hash_with_partials(env, root, name, text)
    _compile(env, root, name, body, sha)
    return PromptTemplate(**header.model_dump(), text=text, sha256=sha, path=path)


def _compile(
    env: jinja2.Environment, root: Path, name: str, body: str, sha: str
) -> jinja2.Template:
    key = (root / name, sha)
    with _lock:
        cached = _compiled.get(key)
    if cached is not None:
        return cached
    try:
        template = env.from_string(body)
    except jinja2.TemplateSyntaxError as exc:
        raise PromptError(f"prompt {name}: line {exc.lineno}: {exc.message}") from exc
    if set(template.blocks) != _BLOCKS:
        raise PromptError(
            f"prompt {name}: must define exactly the blocks system and user, "
            f"found {sorted(template.blocks)}"
        )
    with _lock:
        _compiled[key] = template
    return template


def _check_variables(prompt: PromptTemplate, env: jinja2.Environment) -> None:
    body = _split_front_matter(prompt.text)[1]
    used = jinja2.meta.find_undeclared_variables(_parse(env, body))
    declared = set(prompt.variables)
    problems = []
    if used - declared:
        problems.append(f"uses undeclared variables {sorted(used - declared)}")
    if declared - used:
        problems.append(f"declares unused variables {sorted(declared - used)}")
    if "path" not in declared:
        problems.append("does not use `path` (every request must name its file)")
    if prompt.reply in ("diagnosis", "judge_verdict", "scout_failures") and (
        "reply_schema" not in declared
    ):
        problems.append("asks for JSON but does not take `reply_schema`")
    if problems:
        raise PromptError(f"prompt {prompt.name}: " + "; ".join(problems))


def validate_all(directory: Path | None = None) -> list[PromptTemplate]:
    """Load, compile and check every prompt and partial; call once at start-up.

    Checks: front matter, syntax, exactly the blocks system/user, declared variables equal the
    variables the body uses (``jinja2.meta.find_undeclared_variables``), every prompt takes
    ``path``, JSON prompts take ``reply_schema``, partials use no free variable, and every
    prompt in ``REQUIRED_PROMPTS`` exists.

    Args:
        directory: The prompts directory; the repository's prompts/ by default.

    Returns:
        The loaded prompts, sorted by name.

    Raises:
        PromptError: One line listing every broken prompt and why.
    """
    root = _resolve_dir(directory)
    env = _environment(root)
    errors: list[str] = []
    prompts: list[PromptTemplate] = []
    names = [path.name[: -len(SUFFIX)] for path in sorted(root.glob(f"*{SUFFIX}"))]
    for name, path in ((n, root / f"{n}{SUFFIX}") for n in names):
        try:
            if name.startswith("_"):
                ast = env.parse(path.read_text(encoding="utf-8"))
                free = jinja2.meta.find_undeclared_variables(ast)
                if free:
                    raise PromptError(f"partial {name}: uses free variables {sorted(free)}")
                continue
            prompt = load_prompt(name, root)
            _check_variables(prompt, env)
            prompts.append(prompt)
        except jinja2.TemplateSyntaxError as exc:
            errors.append(f"partial {name}: line {exc.lineno}: {exc.message}")
        except PromptError as exc:
            errors.append(str(exc))
    missing = sorted(set(REQUIRED_PROMPTS) - set(names))
    errors.extend(f"prompt {m}: missing ({m}{SUFFIX} not in {root})" for m in missing)
    if errors:
        raise PromptError("; ".join(errors))
    logger.debug("validated %d prompts in %s", len(prompts), root)
    return prompts


def render(name: str, /, prompts_dir: Path | None = None, **variables: Any) -> RenderedPrompt:
    """Render a prompt into its system and user messages.

    Args:
        name: The prompt's name.
        prompts_dir: The prompts directory; the repository's prompts/ by default.
        **variables: Exactly the variables the prompt declares.

    Returns:
        The rendered messages and the prompt's name, version and sha256.

    Raises:
        PromptError: A declared variable is missing, an unknown one is given, a value lacks
            something the template reads, or the rendered text does not contain ``path``.
    """
    prompt = load_prompt(name, prompts_dir)
    root = _resolve_dir(prompts_dir)
    given, declared = set(variables), set(prompt.variables)
    if given != declared:
        parts = []
        if declared - given:
            parts.append(f"missing variables {sorted(declared - given)}")
        if given - declared:
            parts.append(f"unknown variables {sorted(given - declared)}")
        raise PromptError(f"prompt {name}: " + "; ".join(parts))
    env = _environment(root)
    template = _compile(env, root, name, _split_front_matter(prompt.text)[1], prompt.sha256)
    context = template.new_context(variables)
    try:
        system = "".join(template.blocks["system"](context)).strip()
        user = "".join(template.blocks["user"](context)).strip()
    except (jinja2.UndefinedError, TypeError) as exc:
        # A value of the wrong shape (a missing key, None where text is expected).
        raise PromptError(f"prompt {name}: {exc}") from exc
    if str(variables["path"]) not in system + user:
        raise PromptError(f"prompt {name}: rendered text does not contain the path")
    return RenderedPrompt(meta=prompt.meta, system=system, user=user)
