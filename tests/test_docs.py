"""The README and docs/ stay true to the tree: links resolve, the CLI is documented whole, the
README stays short.

The README is the first screen and a list of links; everything else lives in `docs/`, one page
per topic. These tests catch the ways such pages rot: a page renamed or a heading reworded under
a link, a command or option added without a line in `docs/commands.md`, a module path cited
after it moved, the README growing back into a manual.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests.support.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
COMMANDS_PAGE = DOCS / "commands.md"
#: The README is a first screen plus links; past this it is becoming a manual again.
README_MAX_LINES = 200

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
#: A path into the tree, cited in prose: `sync/store/`, `tests/e2e/test_chaos.py::test_x`.
TREE_PATH = re.compile(r"(?<![\w/.~-])((?:sync|tests|bench|systemd)/[\w./@-]*)")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _prose(text: str) -> str:
    """The text without fenced code blocks, where `[a](b)` or `# x` is code, not markup."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lowercase, punctuation dropped (but
    `-` and `_`), each space a `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a page, with GitHub's `-1`, `-2` for repeated headings."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for m in HEADING.finditer(_prose(text)):
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """Relative links of `page` whose file or `#anchor` does not exist."""
    text = INLINE_CODE.sub("x", _prose(page.read_text()))
    broken: list[str] = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest.read_text())):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert not broken_links(page)


def test_the_link_checker_sees_a_broken_anchor_and_file(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# The mirror's schema\n\n## `ccsync webhooks list`\n")
    page.write_text(
        "[ok](b.md#the-mirrors-schema) [ok](b.md#ccsync-webhooks-list) [ok](#top)\n"
        "[bad](b.md#the-mirror-schema) [bad](c.md) `[code](nowhere.md)`\n"
        "```\n[code](nowhere.md)\n```\n# Top\n"
    )
    assert broken_links(page) == [
        "a.md: b.md#the-mirror-schema (no such heading)",
        "a.md: c.md (no such file)",
    ]


def test_paths_cited_in_the_docs_exist() -> None:
    """A module, test, bench script or unit the docs name in code (`sync/store/`) is in the
    tree: split or moved modules are cited by their package, which does not move."""
    missing = [
        f"{page.name}: {cited}"
        for page in _pages()
        for code in INLINE_CODE.findall(_prose(page.read_text()))
        for cited in TREE_PATH.findall(code)
        if not (ROOT / cited.split("::")[0].rstrip(".")).exists()
    ]
    assert not missing


def test_the_readme_stays_short_and_links_every_docs_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = {t.partition("#")[0] for t in LINK.findall(INLINE_CODE.sub("x", _prose(text)))}
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if f"docs/{p.name}" not in linked]
    assert not unlinked


# --- every command and option in docs/commands.md -------------------------------------------


def sections(text: str) -> dict[str, str]:
    """Each heading's text (backticks dropped) -> its section, up to the next heading of the
    same or a higher level (so a group's section holds its subcommands')."""
    prose = _prose(text)
    heads = list(HEADING.finditer(prose))
    out: dict[str, str] = {}
    for i, m in enumerate(heads):
        level = len(m.group(1))
        end = next((h.start() for h in heads[i + 1 :] if len(h.group(1)) <= level), len(prose))
        out[m.group(2).replace("`", "").strip()] = prose[m.end() : end]
    return out


def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    """`(path, command)` for the command and every subcommand, loading lazy groups as click
    does (`sync.cli.main` imports each command's module through `sync.commands.COMMANDS`)."""
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{path} {name}"
            yield from walk(sub, f"{path} {name}")


def undocumented(root: click.Command, page: str, name: str = "ccsync") -> list[str]:
    """Commands without a heading in `page`, and options whose long name is not in their
    command's section."""
    found = sections(page)
    missing: list[str] = []
    for path, command in walk(root, name):
        section = found.get(path)
        if section is None:
            missing.append(f"{path}: no heading")
            continue
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            for opt in (*param.opts, *param.secondary_opts):
                if opt.startswith("--") and opt != "--help" and f"`{opt}" not in section:
                    missing.append(f"{path}: {opt}")
    return missing


def test_every_command_and_option_is_in_the_commands_page() -> None:
    from sync.cli import main

    assert not undocumented(main, COMMANDS_PAGE.read_text())


def test_a_new_undocumented_command_or_option_fails() -> None:
    """The check above would catch an option or subcommand added without its line."""

    @click.group()
    @click.option("--config", help="file")
    def tool(config: str | None) -> None: ...

    @tool.group()
    def hooks() -> None: ...

    @hooks.command(name="list")
    @click.option("--since", type=int)
    @click.option("--json/--no-json", "as_json")
    def list_(since: int | None, as_json: bool) -> None: ...

    @tool.command()
    def run() -> None: ...

    page = (
        "# `tool`\n\n- `--config PATH`\n\n## `tool hooks`\n\n### `tool hooks list`\n\n"
        "- `--since N`\n- `--json`, `--no-json`\n\n## `tool run`\n"
    )
    assert undocumented(tool, page, "tool") == []
    assert undocumented(tool, page.replace("`--since N`", "since"), "tool") == [
        "tool hooks list: --since"
    ]
    # An option named only in another command's section is not documented.
    moved = page.replace("- `--since N`\n", "").replace(
        "## `tool run`\n", "## `tool run`\n`--since`"
    )
    assert undocumented(tool, moved, "tool") == ["tool hooks list: --since"]
    assert undocumented(tool, page.replace("## `tool run`", "## `tool go`"), "tool") == [
        "tool run: no heading"
    ]


#: Where an operator reads a pointer to the docs: the units, their Litestream config, the example.
POINTERS = [*sorted((ROOT / "systemd").iterdir()), ROOT / "config.example.toml"]


@pytest.mark.parametrize("page", [*sorted(DOCS.glob("*.md")), *POINTERS], ids=lambda p: p.name)
def test_no_page_points_at_a_readme_section(page: Path) -> None:
    """The README is a first screen and links: its old sections moved to docs/ (#48)."""
    assert not re.findall(r'README[,]? "[^"]+"', page.read_text())
    assert "see the README" not in page.read_text()


def test_each_unit_s_documentation_names_a_page_an_install_step_copies() -> None:
    """`Documentation=file:///opt/sync/docs/<page>`: the page exists, and the install steps
    copy docs/ to /opt/sync (#48)."""
    installed = "sudo cp -r docs /opt/sync/"
    assert installed in (DOCS / "service.md").read_text()
    for unit in sorted((ROOT / "systemd").glob("*.service")):
        for line in unit.read_text().splitlines():
            if not line.startswith("Documentation="):
                continue
            local = [u for u in line.split("=", 1)[1].split() if u.startswith("file://")]
            for url in local:
                assert url.startswith("file:///opt/sync/docs/"), (unit.name, url)
                assert (ROOT / url.removeprefix("file:///opt/sync/")).exists(), (unit.name, url)


def test_the_hard_readings_listed_are_those_the_emulator_offers() -> None:
    from sync.emulator.hard import Hard

    (line,) = [x for x in COMMANDS_PAGE.read_text().splitlines() if x.startswith("- `--hard ")]
    names = line.rpartition("): ")[2].rstrip(".").split(", ")
    assert names == Hard.names()
