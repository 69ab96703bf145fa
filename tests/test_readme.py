"""README.md works as written: its Python blocks run, every shell command it shows exists after
the set-up it describes (a Makefile target, an extra, a console script, a ``python -m normlab``
subcommand, a file), and its Colab link agrees with the repository set in _config.yml."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import normlab
import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
# Programs whose commands this test knows how to check; a README command for any other fails.
PROGRAMS = (
    "make",
    "python",
    "python3",
    "pip",
    "conda",
    *PYPROJECT["project"]["scripts"],
)
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")


def fenced(text: str, *languages: str) -> list[str]:
    """The bodies of the fenced code blocks in one of ``languages``."""
    pattern = r"^```(?:" + "|".join(languages) + r")[ \t]*\n(.*?)^```"
    return re.findall(pattern, text, flags=re.M | re.S)


def split(command: str) -> list[str]:
    """Words of a shell command, without its comment and leading ``VAR=value`` assignments."""
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words.pop(0)
    return words


def shell_commands(text: str) -> list[str]:
    """Every line of a bash block, and every inline code span that is a command of a known program."""
    lines = [
        line.strip()
        for block in fenced(text, "bash", "sh", "shell", "console")
        for line in block.splitlines()
    ]
    commands = [line for line in lines if split(line)]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    for span in re.findall(r"`([^`\n]+)`", prose):
        try:
            words = split(span)
        except ValueError:
            continue
        if len(words) > 1 and words[0] in PROGRAMS:
            commands.append(span)
    return commands


def make_problem(args: list[str]) -> str | None:
    targets = [a for a in args if not a.startswith("-") and "=" not in a]
    assignments = [a for a in args if "=" in a]
    if not targets:
        return "names no make target"
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    for target in targets:
        done = subprocess.run(
            ["make", "-n", "-C", str(ROOT), target, *assignments],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return f"make target {target!r} does not run: {done.stderr.strip()}"
    return None


def normlab_problem(args: list[str]) -> str | None:
    """``python -m normlab ARGS``: the subcommand parses, and names a registered experiment."""
    from normlab import experiments
    from normlab.__main__ import main

    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()) as err,
    ):
        try:
            main([*args, "--help"])
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                return f"python -m normlab {' '.join(args)}: {err.getvalue().strip().splitlines()[-1]}"
    if (
        args[0] in ("run", "report")
        and len(args) > 1
        and args[1] not in experiments.names()
    ):
        return f"no experiment {args[1]!r}; registered: {experiments.names()}"
    return None


def pip_problem(args: list[str]) -> str | None:
    if args[:1] != ["install"]:
        return "only `pip install` is checked"
    extras = PYPROJECT["project"]["optional-dependencies"]
    for spec in (a for a in args[1:] if not a.startswith("-")):
        match = re.fullmatch(r"(\.|normlab)(?:\[([\w,]+)\])?", spec)
        if match is None:
            return f"installs {spec!r}, not this project"
        unknown = set(filter(None, (match.group(2) or "").split(","))) - set(extras)
        if unknown:
            return f"no extra {sorted(unknown)} in pyproject.toml"
    return None


def conda_problem(args: list[str]) -> str | None:
    if args[:2] == ["env", "create"] and "-f" in args:
        name = args[args.index("-f") + 1]
        return None if (ROOT / name).is_file() else f"no file {name}"
    if args[:1] == ["activate"] and len(args) == 2:
        name = yaml.safe_load((ROOT / "environment.yml").read_text())["name"]
        return (
            None
            if args[1] == name
            else f"environment.yml names the environment {name!r}"
        )
    return "unrecognised conda command"


def command_problem(command: str) -> str | None:
    """Why ``command`` would not work after the README's set-up, or None when it would."""
    words = split(command)
    program, args = words[0], words[1:]
    for assignment in shlex.split(command, comments=True):
        variable, _, value = assignment.partition("=")
        if variable in ("NORMLAB_PROFILE", "PROFILE") and value not in normlab.PROFILES:
            return f"{assignment}: expected one of {normlab.PROFILES}"
    if program == "make":
        return make_problem(args)
    if program in ("python", "python3"):
        if args[:2] == ["-m", "normlab"]:
            return normlab_problem(args[2:])
        return "only `python -m normlab ...` is checked"
    if program in PYPROJECT["project"]["scripts"]:
        return normlab_problem(args)
    if program == "pip":
        return pip_problem(args)
    if program == "conda":
        return conda_problem(args)
    return f"{program!r} is not a command this test can check (extend tests/test_readme.py)"


COMMANDS = shell_commands(README)


def test_readme_shows_commands() -> None:
    assert any(split(c)[:2] == ["make", "lab"] for c in COMMANDS), (
        "README must show how to open the notebooks"
    )


@pytest.mark.parametrize(
    "command", COMMANDS, ids=[" ".join(split(c)) for c in COMMANDS]
)
def test_readme_command_exists(command: str) -> None:
    assert command_problem(command) is None, command_problem(command)


@pytest.mark.parametrize(
    "command, problem",
    [
        ("make no-such-target", "make target 'no-such-target' does not run"),
        ("python -m normlab no-such-subcommand", "invalid choice"),
        (
            "NORMLAB_PROFILE=quick python -m normlab run no_such_experiment",
            "no experiment",
        ),
        ('pip install -e ".[no_such_extra]"', "no extra"),
        ("jupyter lab book/", "not a command this test can check"),
        ("make lab PROFILE=fast", "expected one of"),
    ],
)
def test_a_wrong_command_is_caught(command: str, problem: str) -> None:
    found = command_problem(command)
    assert found is not None and problem in found, found


@pytest.mark.parametrize("index", range(len(fenced(README, "python"))))
def test_readme_python_block_runs(index: int, tmp_path: Path) -> None:
    """Each block runs as a new user would paste it: its own interpreter, quick profile, CPU."""
    block = fenced(README, "python")[index]
    package = str(Path(normlab.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "NORMLAB_PROFILE": "quick",
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [package, os.environ.get("PYTHONPATH")])
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def repository() -> tuple[str, str]:
    """``owner/name`` and branch of the repository, from _config.yml."""
    match = re.fullmatch(
        r"https://github\.com/([\w.-]+/[\w.-]+?)/?", CONFIG["repository"]["url"]
    )
    assert match, (
        f"_config.yml repository.url is not a GitHub repository: {CONFIG['repository']['url']}"
    )
    return match.group(1), CONFIG["repository"]["branch"]


def test_colab_links_follow_config() -> None:
    """A Colab link opens a chapter's reader notebook where _config.yml publishes it."""
    from normlab_book.reader import colab_link, read_book

    launch = CONFIG["launch_buttons"]
    links = re.findall(r"https://colab\.research\.google\.com/[^\s`)>\]]+", README)
    assert links, "README shows no Colab link"
    chapters = [c.name for c in read_book(ROOT).chapters]
    for link in links:
        name = link.rsplit("/", 1)[-1].removesuffix(".ipynb")
        assert name in chapters, f"{link} opens no chapter of _toc.yml"
        expected = colab_link(
            launch["colab_url"],
            CONFIG["repository"]["url"],
            launch["pages_branch"],
            name,
        )
        assert link == expected, f"{link} is not {expected} (from _config.yml)"
    section = README[README.index("## Open a chapter on Colab") :]
    assert "`_config.yml`" in section.split("\n## ")[0], (
        "README must say where the repository URL is set"
    )


def test_notebook_install_cells_follow_config() -> None:
    slug, branch = repository()
    for path in sorted((ROOT / "book").rglob("*.ipynb")):
        for found_slug, found_branch in re.findall(
            r"git\+https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?@([\w./-]+)",
            path.read_text(),
        ):
            assert (found_slug, found_branch) == (slug, branch), (
                f"{path.name} installs from {found_slug}@{found_branch}"
            )


def test_widget_extension_is_installed() -> None:
    """JupyterLab renders widgets through this prebuilt extension (from jupyterlab_widgets)."""
    extension = (
        Path(sys.prefix)
        / "share/jupyter/labextensions/@jupyter-widgets/jupyterlab-manager/package.json"
    )
    assert extension.is_file(), f"{extension} is missing: pip install -e '.[lab]'"
