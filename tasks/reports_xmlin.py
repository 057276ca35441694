"""Untrusted XML in: decoded text chunks, and the entity guard that runs beside the C parser.

The JUnit parser hands the C ElementTree parser decoded text (``str``), so every encoding is
decoded here, once, with the same rules: a byte order mark wins, then the XML declaration's
``encoding``, else UTF-8. Invalid bytes become U+FFFD and characters XML 1.0 forbids (ANSI
colour codes in captured output, NUL) are replaced, so a damaged report keeps its cases.

Entities: no entity is ever expanded or loaded. :class:`EntityGuard` sees the document before
the C parser does and refuses any ``<!ENTITY>`` declaration (billion laughs, external entities,
parameter entities). The C parser itself rejects a reference to an undeclared entity, except in
one case XML allows: a document whose DOCTYPE names an external DTD may use entities the DTD
declares, and expat then silently drops such references in attribute values (an empty
``message``). For those documents only, the guard keeps reading the raw markup with a second
expat parser and refuses any entity reference other than the five predefined ones.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from typing import IO, Any
from xml.parsers import expat

from tasks.errors import ReportError

#: Bytes read per chunk: small enough that the cases completed by one chunk stay few.
CHUNK = 1 << 16

_DECLARED = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
# Characters XML 1.0 forbids; real reports carry them (ANSI colour codes in captured output).
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_FORBIDDEN_BYTES = re.compile(b"[\x00-\x08\x0b\x0c\x0e-\x1f]")
# An entity reference that is not one of XML's five predefined entities or a character ref.
_ENTITY_REF = re.compile(r"&(?!(?:amp|lt|gt|quot|apos);|#)([^\s;&<>\"']{0,40})")
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class Refused(Exception):
    """Hostile or foreign content: the message is the one-line reason."""


def _codec(head: bytes, source: str) -> tuple[str, int]:
    """(codec name, bytes of byte order mark to skip) for a document's first bytes."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    if head.startswith(b"<\x00"):
        return "utf-16-le", 0
    if head.startswith(b"\x00<"):
        return "utf-16-be", 0
    m = _DECLARED.match(head)
    if m is None:
        return "utf-8", 0
    declared = m.group(1).decode("ascii").lower()
    try:
        name = codecs.lookup(declared).name
    except LookupError:
        raise ReportError(source, f"cannot decode XML: unknown encoding {declared!r}") from None
    # A declaration readable as ASCII cannot be UTF-16/32: the declaration is wrong.
    return ("utf-8" if name.startswith(("utf-16", "utf-32")) else name), 0


def text_chunks(stream: IO[bytes], head: bytes, source: str) -> Iterator[str | bytes]:
    """Yield the document as repaired UTF-8: the first chunk as text, later ones as text or bytes.

    The first chunk is always text, which makes the C parser read everything as UTF-8 whatever
    the document declares. Later chunks of a UTF-8 document that are plain ASCII without
    forbidden control characters (nearly all of a real report) are passed on as the bytes
    they are: decoding and re-encoding them would only cost time.

    Raises:
        ReportError: when the declared encoding is unknown.
    """
    name, skip = _codec(head, source)
    decoder = codecs.getincrementaldecoder(name)(errors="replace")
    plain_ok = name == "utf-8"
    data = head[skip:]
    first = True
    while True:
        if (
            plain_ok
            and not first
            and data.isascii()
            and not _FORBIDDEN_BYTES.search(data)
            and not decoder.getstate()[0]
        ):
            yield data
        else:
            text = decoder.decode(data, final=not data)
            if _FORBIDDEN.search(text):
                text = _FORBIDDEN.sub("\ufffd", text)
            if text or first:
                yield text
            first = False
        if not data:
            return
        data = stream.read(CHUNK)


def _refuse_declaration(*_: Any) -> None:
    raise Refused("entity declarations are refused (entity expansion or external entity)")


def _refuse_external(*_: Any) -> int:
    raise Refused("external entities are refused")


class EntityGuard:
    """Sees every chunk before the C parser; raises :class:`Refused` on entity use.

    Until the root element starts, a small expat parser reads the prolog and refuses entity
    declarations. When the DOCTYPE names an external DTD, a second parser reads the whole
    document's raw markup for entity references (see the module docstring); otherwise the
    guard stops after the prolog and costs nothing more.
    """

    def __init__(self) -> None:
        """Create the prolog parser."""
        self._prolog: Any = self._parser()
        self._prolog.StartDoctypeDeclHandler = self._doctype
        self._prolog.StartElementHandler = self._root
        self._seen_root = False
        self._external = False
        self._fed: list[str | bytes] = []
        self._raw: Any = None
        self._in_cdata = False

    @staticmethod
    def _parser() -> Any:
        parser = expat.ParserCreate(encoding="utf-8")
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.EntityDeclHandler = _refuse_declaration
        parser.UnparsedEntityDeclHandler = _refuse_declaration
        parser.ExternalEntityRefHandler = _refuse_external
        return parser

    def _doctype(self, _name: str, system_id: str | None, public_id: str | None, _i: int) -> None:
        self._external = bool(system_id or public_id)

    def _root(self, _name: str, _attrs: Any) -> None:
        self._seen_root = True
        self._prolog.StartElementHandler = None

    def feed(self, chunk: str | bytes) -> None:
        """Check one chunk (call before the C parser sees it)."""
        if self._raw is not None:
            self._feed_raw(chunk)
            return
        if self._prolog is None:
            return
        self._fed.append(chunk)
        try:
            self._prolog.Parse(chunk, False)
        except expat.ExpatError:
            self._seen_root = True  # malformed: the C parser gives the precise error
        if not self._seen_root:
            return
        self._prolog = None
        if self._external:
            self._raw = self._raw_parser()
            for earlier in self._fed:
                self._feed_raw(earlier)
        self._fed = []

    def _raw_parser(self) -> Any:
        parser = self._parser()
        # Without element or text handlers, expat hands the raw markup to the default
        # handler: start tags with their attribute values as written, text with its references.
        parser.DefaultHandler = self._check_raw
        parser.SkippedEntityHandler = self._skipped
        parser.StartCdataSectionHandler = self._cdata_start
        parser.EndCdataSectionHandler = self._cdata_end
        parser.CommentHandler = lambda _text: None
        parser.ProcessingInstructionHandler = lambda _target, _data: None
        return parser

    def _feed_raw(self, chunk: str | bytes) -> None:
        try:
            self._raw.Parse(chunk, False)
        except expat.ExpatError:
            self._raw = None  # malformed: the C parser reports it

    def _cdata_start(self) -> None:
        self._in_cdata = True

    def _cdata_end(self) -> None:
        self._in_cdata = False

    def _check_raw(self, data: str) -> None:
        if "&" in data and not self._in_cdata:
            m = _ENTITY_REF.search(data)
            if m:
                raise Refused(
                    f"entity reference &{m.group(1)}; refused (entities are not expanded)"
                )

    def _skipped(self, name: str, _is_parameter: int) -> None:
        raise Refused(f"entity reference &{name}; refused (entities are not expanded)")
