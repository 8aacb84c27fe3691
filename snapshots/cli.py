"""kraft-snapshot: look inside a node's metadata log directory or one snapshot or segment file.

Exit codes: 0 success (verify: everything intact); 1 verify found a problem, a tree path
does not exist, or `acls --check` was refused; 2 bad usage; 3 the input cannot be read or the
image cannot be built (missing, damaged, truncated, zero-length or foreign file, offset out
of range).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from snapshots import acls, tree
from snapshots.diff import diff_images
from snapshots.dump import dump_file, dump_files
from snapshots.render import provenance_json, provenance_text
from snapshots.source import Built, Source, SourceError, build_image, open_source
from snapshots.verify import verify_source

PROG = "kraft-snapshot"
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3

AT_OFFSET_HELP = (
    "build the image from every record with an offset below N (N itself excluded): the state "
    "of a node whose next offset to apply is N, which is also what a snapshot with end offset "
    "N holds. Starts from the newest snapshot at or below N, then replays the log. Default: "
    "every record on disk (the tail may hold records not yet committed)"
)

SOURCE_HELP = ("a node's metadata log directory (__cluster_metadata-0, or the metadata.log.dir "
               "holding it), a %%020d-%%010d.checkpoint snapshot, or a %%020d.log segment")

EPILOG = """tree layout:
  /provenance                     offset, epoch and time of the last record applied
  /features/<name>                finalized feature level
  /cluster/brokers/<id>           broker registration
  /topics/<name>/id, /<partition> topic id, partition registrations
  /configs/<TYPE>[:<name>]/<key>  config value (BROKER alone: the cluster-wide default)
  /acls/<id>                      ACL binding
  /scram/<mechanism>/<user>       SCRAM credential's iterations (never its salt or keys)
  /clientQuotas/<entity>/<key>    client quota, e.g. /clientQuotas/user(alice)_clientId(app)

exit codes:
  0  success; verify: every file intact
  1  verify found a problem; ls/cat/tree/find: no such path; acls --check: denied
  2  bad usage
  3  the input cannot be read or the image cannot be built (missing, damaged, truncated,
     zero-length or foreign file; offset out of range)

examples:
  kraft-snapshot tree /var/lib/kraft/meta /topics/orders
  kraft-snapshot cat  /var/lib/kraft/meta /cluster/brokers/1 --at-offset 1200
  kraft-snapshot diff /var/lib/kraft/meta --from 1000 --to 2000
  kraft-snapshot acls /var/lib/kraft/meta --at-offset 1200 --who-can WRITE --topic orders
  kraft-snapshot acls /var/lib/kraft/meta --at-offset 1200 --check --principal User:alice \
                 --operation WRITE --topic orders --super-users 'User:admin'
  kraft-snapshot dump meta/__cluster_metadata-0/00000000000000001024-0000000003.checkpoint
  kraft-snapshot verify /var/lib/kraft/meta --json
"""


class _Failure(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _offset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an offset: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset is not negative: {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Inspect KRaft metadata snapshots and log segments.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, read: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("source", metavar="SOURCE", help=SOURCE_HELP)
        sub.add_argument("--json", action="store_true", help="machine-readable output")
        if read:
            sub.add_argument("--at-offset", type=_offset, metavar="N", help=AT_OFFSET_HELP)
        return sub

    command("ls", "list the children of tree paths").add_argument(
        "paths", nargs="*", default=["/"], metavar="PATH", help="globs allowed (default /)")
    command("cat", "print the values of tree leaves").add_argument(
        "paths", nargs="+", metavar="PATH", help="globs allowed")
    command("tree", "print a subtree recursively").add_argument(
        "paths", nargs="*", default=["/"], metavar="PATH", help="globs allowed (default /)")
    find = command("find", "print every path below a tree path")
    find.add_argument("paths", nargs="*", default=["/"], metavar="PATH")
    find.add_argument("--name", metavar="GLOB", help="only paths whose last part matches")
    diff = command("diff", "what changed between two offsets", read=False)
    diff.add_argument("--from", dest="from_offset", type=_offset, required=True, metavar="A",
                      help="the image below offset A (as --at-offset)")
    diff.add_argument("--to", dest="to_offset", type=_offset, required=True, metavar="B",
                      help="the image below offset B (as --at-offset)")
    acls.add_arguments(command(
        "acls", "list the ACL bindings in force (as kafka-acls.sh --list), or ask the "
        "authorizer who may do what (--check, --who-can)"))
    command("dump", "print every batch and record of the files", read=False)
    command("verify", "check every CRC, header and footer, offsets and epochs", read=False)
    return parser


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _out(line: str) -> None:
    print(line)


def _image(source: Source, at_offset: int | None) -> Built:
    return build_image(source, at_offset, _warn)


def _resolve(root: tree.Directory, paths: Sequence[str], command: str) -> \
        list[tuple[str, tree.Node]]:
    found = []
    for path in paths:
        try:
            found.extend(tree.resolve(root, path))
        except tree.PathNotFound:
            raise _Failure(f"{command}: {path}: No such file or directory.", EXIT_PROBLEM) \
                from None
    return found


def _emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


def cmd_ls(args: argparse.Namespace, source: Source) -> int:
    root = tree.image_tree(_image(source, args.at_offset).image)
    found = _resolve(root, args.paths, "ls")
    listing: dict[str, list[str]] = {}
    for path, node in found:
        if isinstance(node, tree.Directory):
            listing[path] = tree.sorted_names(node.children())
        else:
            listing[path] = [path.rsplit("/", 1)[-1]]
    if args.json:
        _emit_json(listing)
        return EXIT_OK
    # As ls(1): leaves first, by path; then each directory, with a heading when there are
    # several targets.
    leaves = [path for path, node in found if isinstance(node, tree.Leaf)]
    directories = [path for path, node in found if isinstance(node, tree.Directory)]
    for path in leaves:
        _out(path)
    for index, path in enumerate(directories):
        if len(found) > 1:
            if index or leaves:
                _out("")
            _out(f"{path}:")
        for name in listing[path]:
            _out(name)
    return EXIT_OK


def cmd_cat(args: argparse.Namespace, source: Source) -> int:
    root = tree.image_tree(_image(source, args.at_offset).image)
    found = _resolve(root, args.paths, "cat")
    for path, node in found:
        if isinstance(node, tree.Directory):
            raise _Failure(f"cat: {path}: Is a directory", EXIT_PROBLEM)
    if args.json:
        values = {path: node.value for path, node in found if isinstance(node, tree.Leaf)}
        _emit_json(values if len(values) > 1 else next(iter(values.values())))
        return EXIT_OK
    for _, node in found:
        assert isinstance(node, tree.Leaf)
        _out(node.text)
    return EXIT_OK


def cmd_tree(args: argparse.Namespace, source: Source) -> int:
    root = tree.image_tree(_image(source, args.at_offset).image)
    found = _resolve(root, args.paths, "tree")
    if args.json:
        values = {path: tree.to_json(node) for path, node in found}
        _emit_json(values if len(values) > 1 else next(iter(values.values())))
        return EXIT_OK
    for path, node in found:
        if path == "/" and isinstance(node, tree.Directory):
            children = node.children()
            for name in tree.sorted_names(children):
                tree.print_tree(name, children[name], _out)
        else:
            tree.print_tree(path.rsplit("/", 1)[-1], node, _out)
    return EXIT_OK


def cmd_find(args: argparse.Namespace, source: Source) -> int:
    root = tree.image_tree(_image(source, args.at_offset).image)
    found = _resolve(root, args.paths, "find")
    paths = [p for start, node in found for p, _ in tree.walk(start, node)
             if args.name is None or fnmatch.fnmatchcase(p.rsplit("/", 1)[-1], args.name)]
    if args.json:
        _emit_json(paths)
    else:
        for path in paths:
            _out(path)
    return EXIT_OK


def cmd_diff(args: argparse.Namespace, source: Source) -> int:
    # The later image continues from the earlier one: both then share one snapshot, and a
    # snapshot's registration offsets do not show up as changes.
    low, high = sorted((args.from_offset, args.to_offset))
    first = _image(source, low).image
    second = build_image(source, high, _warn, after=first).image
    before, after = (first, second) if args.from_offset <= args.to_offset else (second, first)
    changes = diff_images(before, after)
    if args.json:
        _emit_json({
            "from": {"offset": args.from_offset, "provenance": provenance_json(before.provenance)},
            "to": {"offset": args.to_offset, "provenance": provenance_json(after.provenance)},
            "changes": [c.to_json() for c in changes],
        })
        return EXIT_OK
    _out(f"--- below offset {args.from_offset} ({provenance_text(before.provenance)})")
    _out(f"+++ below offset {args.to_offset} ({provenance_text(after.provenance)})")
    for change in changes:
        _out(change.text())
    if not changes:
        _out("no changes")
    return EXIT_OK


def cmd_acls(args: argparse.Namespace, source: Source) -> int:
    image = _image(source, args.at_offset).image
    below = "everything on disk" if args.at_offset is None else f"below offset {args.at_offset}"
    heading = {"offset": args.at_offset, "provenance": provenance_json(image.provenance)}
    where = f"{below}: {provenance_text(image.provenance)}"
    try:
        return acls.run(args, image.acls, heading, where, _out, _emit_json)
    except acls.UsageError as exc:
        raise _Failure(f"acls: {exc}", EXIT_USAGE) from None


def cmd_dump(args: argparse.Namespace, source: Source) -> int:
    problems = []
    for path in dump_files(source):
        try:
            problems += dump_file(path, _out, args.json)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror}")
    for problem in problems:
        print(f"{PROG}: {problem}", file=sys.stderr)
    return EXIT_UNREADABLE if problems else EXIT_OK


def cmd_verify(args: argparse.Namespace, source: Source) -> int:
    report = verify_source(source)
    if args.json:
        _emit_json(report.to_json())
    else:
        for file in report.files:
            what = (f"offsets {file.first_offset}-{file.next_offset - 1}"
                    if file.next_offset is not None and file.first_offset is not None
                    and file.next_offset > file.first_offset else "no batches")
            state = "ok" if not file.problems else f"{len(file.problems)} problem(s)"
            _out(f"{file.path}: {file.kind}, {file.size} bytes, {file.batches} batches, "
                 f"{file.records} records, {what}: {state}")
        for problem in report.problems:
            _out(f"PROBLEM {problem.text()}")
        damaged = len({p.path for p in report.problems})
        _out("OK: every file intact" if report.ok else
             f"DAMAGED: {len(report.problems)} problem(s) in {damaged} file(s)")
    return EXIT_OK if report.ok else EXIT_PROBLEM


COMMANDS: dict[str, Callable[[argparse.Namespace, Source], int]] = {
    "ls": cmd_ls, "cat": cmd_cat, "tree": cmd_tree, "find": cmd_find, "diff": cmd_diff,
    "acls": cmd_acls, "dump": cmd_dump, "verify": cmd_verify,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        source = open_source(args.source)
        return COMMANDS[args.command](args, source)
    except _Failure as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.code
    except SourceError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except BrokenPipeError:  # piped into head: stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        print(f"{PROG}: {exc.filename or args.source}: {exc.strerror}", file=sys.stderr)
        return EXIT_UNREADABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
