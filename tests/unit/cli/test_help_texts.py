"""Every option, positional and subcommand of `gregor` has help text (issue 22, item 4): the
whole argparse tree is walked from broker.cli.build_parser(), so a new flag without `help=`
fails here."""

from __future__ import annotations

import argparse

from broker.cli import build_parser


def _missing_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest for a in action._choices_actions if a.help}
            for name, sub in action.choices.items():
                if name not in helped:
                    missing.append(f"{path} {name} (subcommand)")
                missing += _missing_help(sub, f"{path} {name}")
            continue
        if not action.help or action.help == argparse.SUPPRESS:
            what = "/".join(action.option_strings) or action.dest
            missing.append(f"{path} {what}")
    return missing


def test_every_option_positional_and_subcommand_has_help() -> None:
    assert _missing_help(build_parser(), "gregor") == []


def test_the_walk_finds_an_option_without_help() -> None:
    parser = argparse.ArgumentParser(prog="x")
    sub = parser.add_subparsers()
    s = sub.add_parser("s", help="a subcommand")
    s.add_argument("--flag")
    s.add_argument("pos", help="documented")
    sub.add_parser("bare")
    assert _missing_help(parser, "x") == ["x s --flag", "x bare (subcommand)"]
