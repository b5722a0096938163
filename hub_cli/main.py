"""The `hub` command: chains as code, plugin shortcuts, a live tail and a local runner."""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from hub_cli import __version__, applying, checking, config, explaining, files, planning, shortcuts
from hub_cli import tail as tailing
from hub_cli.client import ApiError, Client
from hub_cli.clock import clock_time

EXIT_ERROR, EXIT_CHANGES = 1, 2


class Context:
    def __init__(self, profile: str | None, as_json: bool):
        self.profile, self.as_json = profile, as_json

    def client(self) -> Client:
        return Client(config.load(self.profile))

    def out(self, data: Any, text: str) -> None:
        click.echo(json.dumps(data, indent=2, sort_keys=True) if self.as_json else text)


def fail(ctx: Context, message: str, **fields: Any) -> None:
    if ctx.as_json:
        click.echo(json.dumps({"error": {"message": message, **fields}}, indent=2, sort_keys=True))
    else:
        click.echo(f"hub: {message}", err=True)
    sys.exit(EXIT_ERROR)


def run(ctx: Context, action) -> Any:
    """Runs `action`; a config, file or API error becomes a message and exit status 1."""
    try:
        return action()
    except config.ConfigError as exc:
        fail(ctx, str(exc))
    except files.FileError as exc:
        fail(ctx, str(exc), file=exc.path, line=exc.line, column=exc.column, field=exc.field)
    except (applying.ApplyError, ValueError, OSError) as exc:
        fail(ctx, str(exc))
    except ApiError as exc:
        fail(ctx, exc.message or f"HTTP {exc.status}", status=exc.status, code=exc.code, field=exc.field)


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
# On by default, as in the admin: a misspelt context field is caught before the code is saved or run.
typecheck_option = click.option("--typecheck/--no-typecheck", default=True,
                                help="Type-check a TypeScript file against the SDK first (default: on).")


@click.group()
@click.version_option(__version__, "--version", prog_name="hub", message="%(prog)s %(version)s")
@click.option("--profile", help="A section of the profile file (default: HUB_PROFILE or 'default').")
@click.pass_context
def cli(click_ctx: click.Context, profile: str | None) -> None:
    """Middleware Hub from the command line. The hub and key come from HUB_URL and HUB_KEY, or from
    a profile file ($XDG_CONFIG_HOME/hub/profiles.ini: [default] url = ..., key = ...)."""
    click_ctx.obj = profile


def _ctx(click_ctx: click.Context, as_json: bool) -> Context:
    return Context(click_ctx.obj, as_json)


@cli.command()
@json_option
@click.pass_context
def whoami(click_ctx: click.Context, as_json: bool) -> None:
    """Check the key: which hub and account it reaches (the key itself is never shown)."""
    ctx = _ctx(click_ctx, as_json)
    target = run(ctx, lambda: config.load(ctx.profile))
    answer = run(ctx, lambda: Client(target).get("ping"))
    name = answer.get("accountName") or f"#{answer['accountId']}"   # a hub older than the name's answer
    ctx.out({"url": target.url, "accountId": answer["accountId"], "accountName": answer.get("accountName"),
             "keyFrom": target.source},
            f"{target.url}: account {name} (id {answer['accountId']}; key from {target.source})")


@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
@json_option
@click.pass_context
def export(click_ctx: click.Context, directory: Path, as_json: bool) -> None:
    """Write the account's installations, chain orders and own plugins' code to DIRECTORY."""
    ctx = _ctx(click_ctx, as_json)
    state = run(ctx, lambda: applying.export(ctx.client()))
    result = run(ctx, lambda: files.write(directory, state))
    ctx.out({"files": [str(p) for p in result.files], "written": [str(p) for p in result.written],
             "removed": [str(p) for p in result.removed]}, result.summary(directory))


def _plan(ctx: Context, directory: Path, prune: bool, typecheck: bool) -> tuple[planning.Plan, list]:
    """The changes apply would make, each rehearsed on the hub (?dryRun=true): the refused ones apart."""
    desired = run(ctx, lambda: files.read(directory))
    client = ctx.client()
    state = run(ctx, lambda: applying.export(client))
    result = planning.plan(desired, state, prune=prune)
    refusals = run(ctx, lambda: checking.check(client, desired, state, result, typecheck))
    refused = {id(r.change) for r in refusals}
    return planning.Plan([c for c in result.changes if id(c) not in refused], result.notes), refusals


@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--prune", is_flag=True, help="Also uninstall plugins the files do not list.")
@typecheck_option
@json_option
@click.pass_context
def plan(click_ctx: click.Context, directory: Path, prune: bool, typecheck: bool, as_json: bool) -> None:
    """Show what `hub apply` would change, each change checked by the hub without changing anything;
    exit 2 when there are changes, 0 when none, 1 when the hub would refuse one."""
    ctx = _ctx(click_ctx, as_json)
    result, refusals = _plan(ctx, directory, prune, typecheck)
    if as_json:
        ctx.out({**result.as_dict(), "errors": [r.as_dict() for r in refusals]}, "")
    else:
        click.echo(planning.render(result, len(refusals)))
        for refusal in refusals:
            click.echo(f"hub: {refusal.error}", err=True)
    sys.exit(EXIT_ERROR if refusals else EXIT_CHANGES if result.changes else 0)


@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--prune", is_flag=True, help="Also uninstall plugins the files do not list.")
@typecheck_option
@json_option
@click.pass_context
def apply(click_ctx: click.Context, directory: Path, prune: bool, typecheck: bool, as_json: bool) -> None:
    """Make the account match DIRECTORY through the API (new code becomes a new, deployed version)."""
    ctx = _ctx(click_ctx, as_json)
    desired = run(ctx, lambda: files.read(directory))
    report = (lambda line: None) if as_json else click.echo
    done = run(ctx, lambda: applying.apply(ctx.client(), desired, prune=prune, report=report, typecheck=typecheck))
    ctx.out({"applied": done}, f"{len(done)} change(s) applied" if done else "no changes")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--name", required=True, help="The plugin's name (its slug finds it).")
@click.option("--draft/--deploy", "draft", default=True,
              help="Save a draft (default; a new plugin is installed disabled) or make it live at once.")
@typecheck_option
@json_option
@click.pass_context
def push(click_ctx: click.Context, file: Path, name: str, draft: bool, typecheck: bool, as_json: bool) -> None:
    """Install FILE as a plugin, or save it as the plugin's next version. Nothing runs without --deploy."""
    ctx = _ctx(click_ctx, as_json)
    answer = run(ctx, lambda: shortcuts.push(ctx.client(), file, name, deploy=not draft, typecheck=typecheck))
    ctx.out(answer, shortcuts.push_summary(answer, name))


@cli.command()
@click.argument("name")
@json_option
@click.pass_context
def versions(click_ctx: click.Context, name: str, as_json: bool) -> None:
    """List a plugin's versions, newest first (* marks the live one)."""
    ctx = _ctx(click_ctx, as_json)
    answer = run(ctx, lambda: shortcuts.versions(ctx.client(), name))
    ctx.out(answer, shortcuts.versions_table(answer))


@cli.command()
@click.argument("name")
@click.argument("number", type=int)
@click.option("--check", "check_calls", type=click.IntRange(1, 1000),
              help="First run the version against this many recorded calls and print the comparison.")
@click.option("--max-different", type=click.FloatRange(0, 100),
              help="Refuse (exit 2, nothing deployed) when more than this percentage of checked calls are not "
                   "the same (checks 200 calls unless --check says).")
@json_option
@click.pass_context
def deploy(click_ctx: click.Context, name: str, number: int, check_calls: int | None, max_different: float | None,
           as_json: bool) -> None:
    """Make version NUMBER of a plugin the live code, optionally checked against recorded calls first."""
    ctx = _ctx(click_ctx, as_json)

    def action() -> dict:
        try:
            return shortcuts.deploy(ctx.client(), name, number, check=check_calls, max_different=max_different)
        except ApiError as exc:
            if exc.code != "check_failed" or not isinstance(exc.extra.get("check"), dict):
                raise
            return {"refused": exc.message, "check": exc.extra["check"]}

    answer = run(ctx, action)
    lines = shortcuts.check_lines(answer["check"]) if "check" in answer else []
    if "refused" in answer:
        ctx.out(answer, "\n".join([*lines, f"hub: not deployed: {answer['refused']}"]))
        sys.exit(EXIT_CHANGES)
    ctx.out(answer, "\n".join([*lines, f"{answer['plugin']}: version {answer['live']} is live"]))


@cli.command()
@click.argument("name")
@json_option
@click.pass_context
def rollback(click_ctx: click.Context, name: str, as_json: bool) -> None:
    """Redeploy the version that was live before the current one."""
    ctx = _ctx(click_ctx, as_json)
    answer = run(ctx, lambda: shortcuts.rollback(ctx.client(), name))
    ctx.out(answer, f"{answer['plugin']}: rolled back, version {answer['live']} is live")


@cli.command()
@click.option("--plugin", help="Only this plugin (its slug).")
@click.option("--hook", help="Only this hook.")
@click.option("--status", help="Only these statuses, comma-separated (e.g. error,timeout,cancelled).")
@click.option("--count", type=int, help="Stop after this many events.")
@json_option
@click.pass_context
def tail(click_ctx: click.Context, plugin: str | None, hook: str | None, status: str | None, count: int | None,
         as_json: bool) -> None:
    """Stream the account's handler runs, logs, warnings and cancels as they happen (filtered by the hub)."""
    ctx = _ctx(click_ctx, as_json)

    def show(event: dict) -> None:
        if as_json:
            click.echo(json.dumps(event, sort_keys=True))
        elif event.get("type") == "ready":
            click.echo(f"tailing (streams last {event.get('maxSeconds')} s, then reconnect); Ctrl-C stops", err=True)
        else:
            click.echo(tailing.line(event))
        sys.stdout.flush()

    params = {"plugin": plugin, "hook": hook, "status": status}
    try:
        run(ctx, lambda: tailing.follow(ctx.client(), params, show, count))
    except KeyboardInterrupt:
        pass


@cli.command()
@click.argument("hook")
@click.option("--context", "context_file", required=True,
              type=click.Path(dir_okay=False, exists=True, path_type=Path), help="A JSON file holding the hook's context.")
@json_option
@click.pass_context
def explain(click_ctx: click.Context, hook: str, context_file: Path, as_json: bool) -> None:
    """Which installations of HOOK's chain would run for the context, and why not, without running any."""
    ctx = _ctx(click_ctx, as_json)

    def ask() -> Any:
        try:
            context = json.loads(context_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{context_file}: not valid JSON: {exc}") from None
        return ctx.client().post(f"hooks/{hook}/explain", {"context": context})

    answer = run(ctx, ask)
    ctx.out(answer, explaining.render(answer))


def _dev_jobs(ctx: Context, compiled, hook: str | None, context_file: Path | None, samples: bool,
              replay: str | None) -> tuple[list[tuple[str, Any]], dict | None]:
    """(hook, context) pairs to run, and the recorded cancel when replaying one."""
    from hub_cli import dev

    if replay:
        entry = dev.replay_entry(ctx.client(), replay)
        return [(entry["hook"], entry["context"])], {"plugin": entry["plugin"], "reason": entry["reason"],
                                                      "version": entry["pluginVersion"], "id": entry["id"]}
    if samples:
        return [(h, dev.sample_context(h)) for h in ([hook] if hook else compiled.hooks)], None
    if context_file is None:
        raise dev.DevError("give --context FILE (a JSON context), --samples or --replay ENTRY_ID")
    if hook is None:
        if len(compiled.hooks) != 1:
            raise dev.DevError(f"the plugin defines {', '.join(compiled.hooks)}: choose one with --hook")
        hook = compiled.hooks[0]
    try:
        context = json.loads(context_file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise dev.DevError(f"{context_file}: not valid JSON: {exc}") from None
    return [(hook, context)], None


@cli.command("dev")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--hook", help="The hook to run (needed when the plugin defines several).")
@click.option("--context", "context_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A JSON file holding the hook's context.")
@click.option("--samples", is_flag=True, help="Run the hook's (or every hook's) realistic sample context.")
@click.option("--replay", "replay", metavar="ENTRY_ID", help="Run a recorded cancel's context from the hub.")
@click.option("--settings", "settings_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A JSON file of settings (host.config).")
@click.option("--allow-fetch", is_flag=True, help="Let host.fetch reach loopback addresses (nothing else).")
@click.option("--kv", "kv_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A JSON object of key -> value: host.kv starts from it, and each run's writes are saved to it.")
@click.option("--watch", is_flag=True, help="Run again each time the file (or the context) is saved.")
@typecheck_option
@json_option
@click.pass_context
def dev_command(click_ctx: click.Context, file: Path, hook: str | None, context_file: Path | None, samples: bool,
                replay: str | None, settings_file: Path | None, allow_fetch: bool, kv_file: Path | None,
                watch: bool, typecheck: bool, as_json: bool) -> None:
    """Run FILE locally on the hub's own runtime (no server, no database) and print its trace. Exits 1 when
    the file does not compile or type-check, or a handler failed (with --watch: the last run's)."""
    from hub_cli import dev

    ctx = _ctx(click_ctx, as_json)
    settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file else None
    say = (lambda line: None) if as_json else (lambda line: click.echo(f"  -> {line}", err=True))
    from hub_cli.local_kv import LocalKv
    from plugins_app.services.kv.checks import KvError

    try:
        kv = LocalKv(kv_file)   # one store for the session: --watch reruns see the earlier runs' writes
    except (ValueError, KvError) as exc:
        raise click.UsageError(f"--kv: {exc}") from None
    runner = dev.Runner()
    runs = itertools.count(1)

    def once() -> bool:
        number = next(runs)
        if number > 1 and not as_json:   # one run's output is told from the last one's at a glance
            click.echo(f"\n----- run {number}, {clock_time(time.time())}: {file.name} changed -----")
        try:
            compiled = runner.compile(file, typecheck=typecheck)
            jobs, recorded = _dev_jobs(ctx, compiled, hook, context_file, samples, replay)
            results = [runner.run(compiled, h, c, settings=settings, allow_fetch=allow_fetch, say=say, kv=kv)
                       for h, c in jobs]
            kv.save()
        except dev.DevError as exc:
            ctx.out({"error": {"message": str(exc)}}, f"hub: {exc}")
            return False
        except (ApiError, config.ConfigError) as exc:
            ctx.out({"error": {"message": str(exc)}}, f"hub: {exc}")
            return False
        text = "\n\n".join(dev.render(r) for r in results)
        if recorded:
            text = (f"recorded: cancelled by {recorded['plugin']} v{recorded['version']}: {recorded['reason']}\n"
                    f"now:      {text}")
        failed = [name for r in results for name in r.failed]
        if failed and not as_json:
            text += f"\nhub: a handler failed ({', '.join(sorted(set(failed)))}): exit status {EXIT_ERROR}"
        ctx.out({"runs": [r.as_dict() for r in results], "recorded": recorded, "failed": failed}, text)
        return not failed

    outcomes = []
    try:
        outcomes.append(once())
        if watch:
            click.echo(f"watching {file} (Ctrl-C stops)", err=True)
            dev.watch([file] + ([context_file] if context_file else []), lambda: outcomes.append(once()))
    except KeyboardInterrupt:
        pass
    finally:
        runner.close()
    sys.exit(0 if outcomes and outcomes[-1] else EXIT_ERROR)


def main() -> None:
    # A usage error exits 1, not click's 2: exit status 2 means "plan found changes" to a CI job.
    try:
        cli.main(prog_name="hub", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_ERROR)
    except click.exceptions.Abort:
        sys.exit(EXIT_ERROR)
