"""The secrets of one chain run: checked and handed to host.fetch as it sends, then redacted from what comes back."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from plugins_app.models import Secret
from plugins_app.runtime.tables.permissions import SECRET_PERMISSION, SECRET_PLACEHOLDER
from plugins_app.runtime.web.chain import Handler, HostError
from plugins_app.services.secrets.hosts import Target, target_allowed
from plugins_app.services.secrets.redaction import Redactor


def substitute(text: str, values: dict[str, str], encode: Callable[[str], str] = str) -> str:
    """`text` with each {{secret.NAME}} of `values` replaced by its (encoded) value."""
    return SECRET_PLACEHOLDER.sub(lambda m: encode(values[m.group(1)]) if m.group(1) in values else m.group(0), text)


class SecretBox:
    """Loads the secrets a run asks for once; every value it hands out or loads is added to its redactor."""

    def __init__(self, account_id: int | None):
        self.account_id = account_id
        self.redactor = Redactor()
        self._loaded: dict[str, Secret | None] = {}
        self._known: set[str] = set()   # granted names already given to the redactor

    def _load(self, names: Iterable[str]) -> None:
        wanted = sorted(set(names) - set(self._loaded))
        if not wanted or self.account_id is None:
            return
        found = {s.name: s for s in Secret.objects.filter(account_id=self.account_id, name__in=wanted)}
        for name in wanted:
            self._loaded[name] = found.get(name)

    def _value(self, secret: Secret) -> str:
        value = secret.value()
        self.redactor.add(secret.name, value)
        return value

    def for_request(self, member: str, handler: Handler, names: list[str], target: Target) -> dict[str, str]:
        """The values of `names` for a request to `target` (scheme, host, port), checked: granted to the
        handler, stored in the account, and `target` allowed by each one's allowedHosts. Raises HostError
        (naming the rule) otherwise."""
        for name in names:
            if f"secret:{name}" not in handler.granted:
                raise HostError(f"{member}: {{{{secret.{name}}}}} needs the secret:{name} permission, which an "
                                f"account admin has not granted to {handler.plugin}; nothing was sent")
        self._load(names)
        values = {}
        for name in names:
            secret = self._loaded.get(name)
            if secret is None:
                raise HostError(f"{member}: this account has no secret named {name}; nothing was sent")
            if not target_allowed(target, secret.allowed_hosts):
                raise HostError(f"{member} refused: secret {name} may only be sent to its allowedHosts "
                                f"({', '.join(secret.allowed_hosts)}; a bare host is https on port 443), and "
                                f"{target} is not one of them; nothing was sent")
            try:
                values[name] = self._value(secret)
            except ValueError as exc:
                raise HostError(f"{member}: {exc}") from None
        return values

    def redactor_for(self, handlers: Iterable[Handler]) -> Redactor:
        """The run's redactor, knowing every secret granted to one of `handlers` (loaded once per run):
        an answer to a handler granted a secret never carries its value, whether or not that call sent it."""
        names = {m.group(1) for h in handlers for p in h.granted if (m := SECRET_PERMISSION.fullmatch(p))}
        names -= self._known
        if names:
            self._load(names)
            for name in sorted(names):
                self._known.add(name)
                secret = self._loaded.get(name)
                if secret is not None:
                    try:
                        self._value(secret)
                    except ValueError:
                        continue   # a value no key decrypts could not have been sent either
        return self.redactor

    def scrub(self, result, handlers: Iterable[Handler]) -> None:
        """The defensive pass over a finished run: every secret granted to one of its handlers is
        replaced in the result (a value could only get there by a route nobody foresaw)."""
        self.redactor_for(handlers).chain_result(result)


def account_redactor(account_id: int) -> Redactor:
    """A redactor that knows every secret of the account, granted or not: for what the hub keeps of the
    calls it received (recorded calls, shadow and check examples), where a value the platform sent in a
    context must not be stored whichever plugin it was meant for."""
    redactor = Redactor()
    for secret in Secret.objects.filter(account_id=account_id):
        try:
            redactor.add(secret.name, secret.value())
        except ValueError:   # a value no key decrypts could not have been sent either
            continue
    return redactor
