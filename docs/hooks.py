"""MkDocs hooks (mkdocs.yml ``hooks:``) for the FastWorker site.

* ``<!-- include: path/from/repo/root.md -->`` on a line of its own is replaced by that
  file, so documents that live next to their code (the wire protocol, the Helm chart's
  README) are published as they are and never drift; ``path.md#heading-slug`` takes only
  that section, without its heading (the README's guarantees). Relative links are rewritten
  for the page that includes them: to the page when the target is part of the site (a
  file under docs/, or another included document), else to the repository path as code,
  since the site cannot link to a file it does not publish.
* Docstrings cross-reference in Sphinx style (``:class:`Timeout```); the API pages show
  those as plain code, the role dropped (``~`` shortens the name, as in Sphinx).
* The generated pages (docs/gen_states.py, docs/gen_cli.py) are compared with what their
  generator renders now; a stale one is a warning, which fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import importlib.util
import logging
import posixpath
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.fastworker")

ROOT = Path(__file__).resolve().parent.parent
DOCS = "docs"
GENERATORS = ("gen_states.py", "gen_cli.py")

INCLUDE = re.compile(r"^<!-- include: (?P<path>[^\s#>]+)(?:#(?P<section>[\w-]+))? -->$", re.M)
HEADING = re.compile(r"^(?P<level>#{1,6}) (?P<title>.+?)\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")
SPHINX_ROLE = re.compile(
    r":(?:py:)?(?:class|meth|func|data|attr|mod|exc|obj):<code>(~?)([^<]*)</code>"
)
CODE_SPAN = re.compile(r"(`+).+?\1")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:|^#|^/", re.IGNORECASE)

_included: dict[str, str] = {}  # repository path of an included file -> page (docs/ path)


def on_pre_build(config: MkDocsConfig) -> None:
    for name in GENERATORS:
        generator = _load(Path(config.docs_dir) / name)
        page = Path(generator.PAGE)
        if not page.is_file() or page.read_text(encoding="utf-8") != generator.render():
            log.warning(
                "%s is stale (its source changed): run `%s`",
                page.relative_to(ROOT),
                generator.COMMAND,
            )


def on_files(files: Files, config: MkDocsConfig) -> Files:
    _included.clear()
    for file in files.documentation_pages():
        for match in INCLUDE.finditer(Path(file.abs_src_path or "").read_text(encoding="utf-8")):
            if match["section"] is None:  # only whole documents stand for their source
                _included[match["path"]] = file.src_uri
    return files


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    def include(match: re.Match[str]) -> str:
        source = match["path"]
        path = ROOT / source
        if not path.is_file():
            log.warning("%s includes %s, which does not exist", page.file.src_uri, source)
            return ""
        text = path.read_text(encoding="utf-8")
        if match["section"] is not None:
            found = section(text, match["section"])
            if found is None:
                log.warning("%s: %s names no section of the file", page.file.src_uri, match[0])
                return ""
            text = found
        return rewrite_links(text, source, page.file.src_uri)

    return INCLUDE.sub(include, markdown)


def section(text: str, slug: str) -> str | None:
    """The body of the section whose heading has ``slug`` (lowercase, words joined by
    hyphens), up to the next heading of the same or a higher level; ``None`` if absent."""
    lines, body, level, in_fence = text.splitlines(keepends=True), [], 0, False
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else HEADING.match(line)
        if level and heading and len(heading["level"]) <= level:
            break
        if level:
            body.append(line)
        elif heading and _slug(heading["title"]) == slug:
            level = len(heading["level"])
    return "".join(body).strip("\n") + "\n" if level else None


def _slug(title: str) -> str:
    return re.sub(r"[^\w\s-]", "", title).strip().lower().replace(" ", "-")


def on_page_content(html: str, **_: Any) -> str:
    def code(match: re.Match[str]) -> str:
        name = match[2].rpartition(".")[2] if match[1] else match[2]
        return f"<code>{name}</code>"

    return SPHINX_ROLE.sub(code, html)


def rewrite_links(text: str, source: str, page: str) -> str:
    """``text`` (the file ``source``, relative to the repository root) with its relative
    links made right for the site page ``page`` (relative to docs/)."""
    out, in_fence = [], False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence or FENCE.match(line):
            out.append(line)
            continue
        out.append(_rewrite_line(line, source, page))
    return "".join(out)


def _rewrite_line(line: str, source: str, page: str) -> str:
    code = [m.span() for m in CODE_SPAN.finditer(line)]

    def rewrite(match: re.Match[str]) -> str:
        if any(start <= match.start() < end for start, end in code):
            return match[0]  # inside an inline code span: not a link
        return _rewrite_link(match, source, page)

    return LINK.sub(rewrite, line)


def _rewrite_link(match: re.Match[str], source: str, page: str) -> str:
    text, target = match["text"], match["target"]
    if EXTERNAL.match(target):
        return match[0]
    path, hash_, fragment = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    page_dir = posixpath.dirname(page)
    if repo_path in _included:
        site_path = _included[repo_path]
    elif repo_path.startswith(DOCS + "/"):
        site_path = repo_path.removeprefix(DOCS + "/")
    else:
        shown = f"`{repo_path}`"
        return shown if text.strip("`") in {repo_path, path} else f"{text} ({shown})"
    return f"[{text}]({posixpath.relpath(site_path, page_dir or '.')}{hash_}{fragment})"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"fastworker_docs_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
