"""One account's type checks never hold another's install (issue 39, item 5): the tenant sends many
pathological checks at once; each is stopped at its bound, the ones past its account's share are
refused at once (busy), the compile engine is never killed, and another account's install compiles."""

import threading

from plugins_app.runtime.engine import compile_queue

# 40 recursive tuple types over a 10,000-member template union: seconds of checking each.
PATHOLOGICAL = ("type U = 'a'|'b'|'c'|'d'|'e'|'f'|'g'|'h'|'i'|'j';\ntype X = `${U}${U}${U}${U}`;\n"
                + "".join(f"type T{i}<N extends unknown[] = []> = N['length'] extends 45 ? N : T{i}<[...N, X]>;\n"
                          f"const v{i}: T{i} = null as any as T{i};\n" for i in range(40))
                + "globalThis.middleware.systemPrompt = async (c: any) => c.systemPrompt;")
TRIVIAL = "const n: number = 1;\nglobalThis.middleware.systemPrompt = async (c: any) => `${c.systemPrompt} ${n}`;"
TENANT_CALLS = 8


def test_a_tenants_type_checks_never_hold_another_accounts_install(one_engine):
    supervisor, tier = one_engine
    [compiler] = supervisor.describe()["compilers"]
    assert not tier.compile(TRIVIAL, "typescript", True, "warm-up")["errors"]   # the library parsed once
    pid = tier.ping(compiler)["pid"]
    started = threading.Barrier(TENANT_CALLS + 1)
    tenant: list[dict] = []

    def check():
        started.wait()
        tenant.append(tier.compile(PATHOLOGICAL, "typescript", True, "tenant"))
        tier.shutdown()   # this thread's links

    threads = [threading.Thread(target=check) for _ in range(TENANT_CALLS)]
    for thread in threads:
        thread.start()
    started.wait()
    victim = tier.compile(TRIVIAL, "typescript", True, "victim")
    for thread in threads:
        thread.join()
    # The victim's install compiled (its turn came after at most the one check running).
    assert victim["errors"] == [] and victim["hooks"] == ["systemPrompt"]
    # Every tenant check was answered: compiled or refused as types (stopped at its bound; once the
    # warm checker has cached the types, a later check may finish in time), or refused for its
    # account's share, at once and with when to try again.
    refused = [r for r in tenant if r.get("busy") == "account"]
    assert compile_queue.MAX_WAITING_PER_ACCOUNT < TENANT_CALLS - 1   # so some must have been refused
    answered = [r for r in tenant if "errors" in r and (r["errors"] == [] or r.get("stage") == "types")]
    assert len(answered) + len(refused) == TENANT_CALLS, [r for r in tenant if r not in answered + refused]
    assert refused and all(r["retryAfter"] > 0 for r in refused)
    # The compile engine lived through it, and still answers.
    assert tier.ping(compiler)["pid"] == pid
    assert tier.compile(TRIVIAL, "typescript", True, "victim")["errors"] == []
