"""`hub plan`'s checks: each change it lists is sent to the hub as `apply` would send it, with ?dryRun=true,
so the hub's own rules judge it and nothing changes; a refusal points at the file, line and field it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from hub_cli import applying, planning
from hub_cli.client import ApiError, Client
from hub_cli.files import Desired, DesiredPlugin, FileError

DRY_RUN = {"dryRun": "true"}


@dataclass
class Refusal:
    change: planning.Change
    error: FileError

    def as_dict(self) -> dict:
        return {"kind": self.change.kind, "target": self.change.target, **self.error.as_dict()}


@dataclass
class _Rehearsed:
    """What the dry runs answered that a later check needs: the hooks a new install or new code will
    have (where each plugin will stand in the chains), the permissions new code asks for."""
    hooks: dict[str, list[str]] = field(default_factory=dict)
    new_permissions: dict[str, set[str]] = field(default_factory=dict)


def check(client: Client, desired: Desired, state: dict, plan: planning.Plan,
          typecheck: bool = True) -> list[Refusal]:
    """Rehearse every change of `plan` on the hub; the refusals, in the order apply would meet them.
    An error that is about no file (the hub unreachable, the key refused) is raised, as apply raises it."""
    ids = {item["plugin"]: item["installationId"] for item in state["plugins"]}
    seen = _Rehearsed()
    refusals: list[Refusal] = []
    touched = {c.target for c in plan.changes if c.kind in ("install", "code", "uninstall")}
    for change in plan.changes:
        try:
            _rehearse(client, desired, change, ids, touched, seen, typecheck)
        except ApiError as exc:
            error = applying.located(desired, change, exc)
            if not isinstance(error, FileError):
                raise error from None
            refusals.append(Refusal(change, error))
        except FileError as exc:
            refusals.append(Refusal(change, exc))
    refused = {r.change.target for r in refusals}
    chains = _expected_chains(state, plan, seen)
    if chains is not None and not refused & touched:
        for field_path, message in planning.chain_mismatches(desired, chains):
            hook = field_path.removeprefix("chains.")
            change = planning.Change("reorder", hook, f"~ chain {hook}")
            refusals.append(Refusal(change, desired.error(field_path, message)))
    return refusals


def _rehearse(client: Client, desired: Desired, change: planning.Change, ids: dict[str, str], touched: set[str],
              seen: _Rehearsed, typecheck: bool) -> None:
    if change.kind == "reorder":
        order = change.data["order"]
        if not touched & set(order):   # else the chain holds other plugins by the time apply reorders
            client.call("PUT", f"chains/{change.target}", {"order": [ids[s] for s in order]}, DRY_RUN)
        return
    if change.kind == "uninstall":
        client.call("DELETE", f"plugins/{ids[change.target]}", None, DRY_RUN)
        return
    wanted = desired.plugins[change.target]
    if change.kind == "install":
        answer = client.call("POST", "plugins", applying.install_body(wanted, typecheck), DRY_RUN)
        seen.hooks[wanted.slug] = list(answer["result"]["hooks"])
    elif change.kind == "code":
        _rehearse_code(client, desired, wanted, ids[wanted.slug], seen, typecheck)
    elif change.kind == "grant":
        # A permission the new code asks for is known to the hub only once apply has saved that code: the
        # rest of the list is what the hub would judge now.
        method, path, body = applying.second_round_call(change, wanted, ids[wanted.slug])
        body = {"grant": [g for g in body["grant"] if g not in seen.new_permissions.get(wanted.slug, set())]}
        client.call(method, path, body, DRY_RUN)
    else:
        method, path, body = applying.second_round_call(change, wanted, ids[wanted.slug])
        client.call(method, path, body, DRY_RUN)


def _rehearse_code(client: Client, desired: Desired, wanted: DesiredPlugin, installation_id: str,
                   seen: _Rehearsed, typecheck: bool) -> None:
    versions = client.get(f"plugins/{installation_id}/versions")["versions"]
    version = applying.same_version(versions, wanted)
    if version is not None:   # apply redeploys it: that deploy is rehearsed as it is
        client.call("POST", f"plugins/{installation_id}/versions/{version['number']}/deploy",
                    {"grant": applying.deploy_grant(wanted, version)}, DRY_RUN)
    else:
        # The draft is rehearsed; its deploy cannot be (the draft is not kept), so what the deploy would
        # refuse is read from the hub's answer: permissions the version asks for that neither the
        # installation has nor the deploy would grant.
        body = applying.draft_body(wanted, typecheck)
        version = client.call("POST", f"plugins/{installation_id}/versions", body, DRY_RUN)["result"]
        seen.new_permissions[wanted.slug] = set(version["permissions"])
        missing = sorted(set(version["notGranted"]) - set(applying.deploy_grant(wanted, version)))
        if missing:
            raise desired.error(f"plugins.{wanted.slug}.granted",
                                f"the new code asks for {', '.join(missing)}, which is not granted: list it "
                                "under granted: (apply would refuse to deploy the code)")
    seen.hooks[wanted.slug] = list(version["hooks"])


def _expected_chains(state: dict, plan: planning.Plan, seen: _Rehearsed) -> dict[str, list[str]] | None:
    """Each hook's chain as apply will find it before it reorders: uninstalled plugins gone, new code's
    plugins out of the hooks it no longer has and at the end of the ones it gains, new installs at the
    end. None when the hooks of an install or of new code are unknown (its rehearsal was refused)."""
    chains = {hook: list(order) for hook, order in state["chains"].items()}
    for change in plan.changes:
        slug = change.target
        if change.kind == "uninstall":
            chains = {hook: [s for s in order if s != slug] for hook, order in chains.items()}
        elif change.kind in ("install", "code"):
            hooks = seen.hooks.get(slug)
            if hooks is None:
                return None
            chains = {hook: [s for s in order if s != slug or hook in hooks] for hook, order in chains.items()}
            for hook in hooks:
                if slug not in chains.setdefault(hook, []):
                    chains[hook].append(slug)
    return {hook: order for hook, order in chains.items() if order}
