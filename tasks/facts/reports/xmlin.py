"""Untrusted XML in: repaired UTF-8 chunks, and the entity guard that runs beside the C parser.

The JUnit parser hands expat UTF-8 bytes and tells it so, so every encoding is decoded here,
once, with the same rules: a byte order mark wins, then the XML declaration's ``encoding``,
else UTF-8. Invalid bytes become U+FFFD and characters XML 1.0 forbids (ANSI colour codes in
captured output, NUL) are replaced, so a damaged report keeps its cases.

Entities: no entity is ever expanded or loaded. :class:`EntityGuard` sees the document before
the C parser does and refuses any ``<!ENTITY>`` declaration (billion laughs, external entities,
parameter entities); the C parser refuses them too. The C parser rejects a reference to an
undeclared entity, except in one case XML allows: a document whose DOCTYPE names an external
DTD may use entities the DTD declares, and expat then silently drops such references in
attribute values (an empty ``message``). For those documents only, the guard reads the whole
document's raw markup with its own expat parser and refuses any entity reference other than
the five predefined ones.
"""

from __future__ import annotations

import codecs
import re
from typing import IO, Any
from xml.parsers import expat

from tasks.core.errors import ReportError

#: Bytes read per chunk: small enough that the cases completed by one chunk stay few.
CHUNK = 1 << 16

_DECLARED = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
# Characters XML 1.0 forbids; real reports carry them (ANSI colour codes in captured output).
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
# The same as single bytes: one `in` (memchr) per byte value is far faster than a regex.
_FORBIDDEN_ASCII = tuple(bytes([c]) for c in range(32) if c not in (9, 10, 13))
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


class Utf8Reader:
    """Reads a document as repaired UTF-8 bytes, in chunks of the size the caller asks for.

    The C parser is told the input is UTF-8 whatever the document declares, so every encoding
    is decoded here, once. Chunks of a UTF-8 document that are plain ASCII without forbidden
    control characters (nearly all of a real report) are passed on as the bytes they are:
    decoding and re-encoding them would only cost time.
    """

    def __init__(self, stream: IO[bytes], head: bytes, source: str) -> None:
        """Start after ``head`` (the bytes already read from ``stream``).

        Raises:
            ReportError: when the declared encoding is unknown.
        """
        name, skip = _codec(head, source)
        self._stream = stream
        self._head = head[skip:]
        self._plain = name == "utf-8"
        self._decoder = codecs.getincrementaldecoder(name)(errors="replace")
        #: True once the last chunk has been returned.
        self.eof = False

    def read(self, size: int) -> bytes:
        """The next chunk (about ``size`` bytes of input); sets :attr:`eof` with the last one."""
        data, self._head = (self._head, b"") if self._head else (self._stream.read(size), b"")
        if not data:
            self.eof = True
            return _repair(self._decoder.decode(b"", final=True))
        if self._plain and data.isascii() and not self._decoder.getstate()[0]:
            for byte in _FORBIDDEN_ASCII:
                if byte in data:
                    break
            else:
                return data
        return _repair(self._decoder.decode(data))


def _repair(text: str) -> bytes:
    """Text as UTF-8 with the characters XML 1.0 forbids replaced by U+FFFD."""
    if _FORBIDDEN.search(text):
        text = _FORBIDDEN.sub("\ufffd", text)
    return text.encode("utf-8", errors="replace")


def refuse_declaration(*_: Any) -> None:
    """expat handler: an entity declaration is refused."""
    raise Refused("entity declarations are refused (entity expansion or external entity)")


def refuse_external(*_: Any) -> int:
    """expat handler: an external entity is never loaded."""
    raise Refused("external entities are refused")


class _Stop(Exception):
    """Raised inside the guard's handler to stop reading: nothing more to check."""


class EntityGuard:
    """Sees every chunk before the C parser; raises :class:`Refused` on entity use.

    A small expat parser without element or text handlers reads the raw markup (expat hands
    it to the default handler: start tags with their attribute values as written, text with
    its references) and refuses entity declarations. When the root element starts and the
    DOCTYPE named no external DTD, the guard stops: it costs the prolog and nothing more.
    Otherwise it keeps reading the whole document and refuses any entity reference other than
    the five predefined ones (see the module docstring).
    """

    def __init__(self) -> None:
        """Create the guard's parser."""
        parser = expat.ParserCreate(encoding="utf-8")
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.EntityDeclHandler = refuse_declaration
        parser.UnparsedEntityDeclHandler = refuse_declaration
        parser.ExternalEntityRefHandler = refuse_external
        parser.StartDoctypeDeclHandler = self._doctype
        parser.DefaultHandler = self._check_raw
        parser.SkippedEntityHandler = self._skipped
        parser.StartCdataSectionHandler = self._cdata_start
        parser.EndCdataSectionHandler = self._cdata_end
        parser.CommentHandler = lambda _text: None
        parser.ProcessingInstructionHandler = lambda _target, _data: None
        self._raw: Any = parser
        self._seen_root = False
        self._external = False
        self._in_cdata = False

    def _doctype(self, _name: str, system_id: str | None, public_id: str | None, _i: int) -> None:
        self._external = bool(system_id or public_id)

    def feed(self, chunk: bytes) -> None:
        """Check one chunk (call before the C parser sees it)."""
        if self._raw is None:
            return
        try:
            self._raw.Parse(chunk, False)
        except (expat.ExpatError, _Stop):
            self._raw = None  # done, or malformed: then the C parser gives the precise error

    def _cdata_start(self) -> None:
        self._in_cdata = True

    def _cdata_end(self) -> None:
        self._in_cdata = False

    def _check_raw(self, data: str) -> None:
        if not self._seen_root and data[:1] == "<" and data[1:2] not in ("!", "?"):
            self._seen_root = True  # the root's start tag
            if not self._external:
                raise _Stop
        if "&" in data and not self._in_cdata:
            m = _ENTITY_REF.search(data)
            if m:
                raise Refused(
                    f"entity reference &{m.group(1)}; refused (entities are not expanded)"
                )

    def _skipped(self, name: str, _is_parameter: int) -> None:
        raise Refused(f"entity reference &{name}; refused (entities are not expanded)")
