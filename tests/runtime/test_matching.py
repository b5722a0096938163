"""runtime/matching: every operator, nesting, list and null fields, ids as strings, RE2's linear time."""

import pytest

from plugins_app.runtime.matching import declare as declaring
from plugins_app.runtime.matching import words
from plugins_app.runtime.matching.declare import MatcherError, declare
from plugins_app.runtime.matching.evaluate import check, pattern_error
from plugins_app.runtime.matching.evaluate import holds as fast_holds
from plugins_app.runtime.tables.hooks import HOOKS

SSH = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "web", "kind": "command",
       "command": "sudo rm -rf /tmp/x", "path": None, "content": None}
PROMPT = {"sessionId": "1", "agentId": "7", "sessionKind": "direct", "systemPrompt": "Be brief."}
TODOS = {"sessionId": "1", "texts": ["write docs", "Deploy to prod"]}
NOTIFY = {"sessionId": "1", "message": "wake up", "delaySeconds": 60}
REPORT = {"senderSessionId": "1", "senderAgentId": "2", "targetSessionId": "3", "isSubagentReport": True, "text": "x"}


def holds(hook, matcher, context):
    """Declared (so checked) as a plugin would, then evaluated both ways (the seam's and explain's agree)."""
    clean = declare({hook: matcher}, [hook], HOOKS)[hook]
    verdict = check(clean, context)
    assert fast_holds(clean, context) is verdict.matched and (verdict.failed is None) is verdict.matched
    return verdict.matched


@pytest.mark.parametrize(("hook", "matcher", "context", "expected"), [
    ("sshCommandSending", {"command": {"equals": "sudo rm -rf /tmp/x"}}, SSH, True),
    ("sshCommandSending", {"command": {"equals": "ls"}}, SSH, False),
    ("sshCommandSending", {"kind": {"in": ["command", "write_file"]}}, SSH, True),
    ("sshCommandSending", {"kind": {"in": ["read_file"]}}, SSH, False),
    ("sshCommandSending", {"command": {"includes": "rm"}}, SSH, True),
    ("sshCommandSending", {"command": {"includes": ["mkfs", "dd "]}}, SSH, False),
    ("sshCommandSending", {"command": {"startsWith": ["sudo ", "doas "]}}, SSH, True),
    ("sshCommandSending", {"command": {"startsWith": "rm"}}, SSH, False),
    ("sshCommandSending", {"command": {"regex": r"\brm\s+-[a-z]*r"}}, SSH, True),
    ("sshCommandSending", {"command": {"regex": r"^rm\b"}}, SSH, False),
    ("sshCommandSending", {"command": {"includes": "SUDO", "ignoreCase": True}}, SSH, True),
    ("sshCommandSending", {"command": {"includes": "SUDO"}}, SSH, False),
    ("sshCommandSending", {"command": {"regex": "^SUDO", "ignoreCase": True}}, SSH, True),
    ("sshCommandSending", {"command": {"not": {"includes": "rm"}}}, SSH, False),
    ("sshCommandSending", {"not": {"kind": {"equals": "read_file"}}}, SSH, True),
    ("sshCommandSending", {"any": [{"kind": {"equals": "read_file"}}, {"command": {"includes": "rm"}}]}, SSH, True),
    ("sshCommandSending", {"any": [{"kind": {"equals": "read_file"}}, {"command": {"includes": "mv"}}]}, SSH, False),
    ("sshCommandSending", {"all": [{"kind": {"equals": "command"}}, {"command": {"includes": "rm"}}]}, SSH, True),
    ("sshCommandSending", {"all": [{"kind": {"equals": "command"}}, {"command": {"includes": "mv"}}]}, SSH, False),
    ("sshCommandSending", {"command": {"any": [{"startsWith": "ls"}, {"regex": "-rf"}]}}, SSH, True),
    ("sshCommandSending", {"command": {"all": [{"startsWith": "sudo"}, {"not": {"regex": "-rf"}}]}}, SSH, False),
    # nesting several levels deep
    ("sshCommandSending", {"any": [{"not": {"any": [{"kind": {"equals": "command"}}]}},
                                   {"all": [{"command": {"includes": "rm"}}, {"path": {"equals": None}}]}]}, SSH, True),
    # null and absent (optional) fields
    ("sshCommandSending", {"path": {"equals": None}}, SSH, True),
    ("sshCommandSending", {"path": {"includes": "/"}}, SSH, False),
    ("sshCommandSending", {"path": {"not": {"includes": "/"}}}, SSH, True),
    ("sshCommandSending", {"intent": {"equals": None}}, SSH, True),
    ("sshCommandSending", {"intent": {"regex": "."}}, SSH, False),
    # several fields: each must hold
    ("systemPrompt", {"agentId": {"in": ["7", "9"]}, "sessionKind": {"in": ["direct"]}}, PROMPT, True),
    ("systemPrompt", {"agentId": {"in": ["7", "9"]}, "sessionKind": {"in": ["channel"]}}, PROMPT, False),
    # ids are strings, compared as strings
    ("systemPrompt", {"agentId": {"equals": "7"}}, PROMPT, True),
    ("systemPrompt", {"agentId": {"equals": "07"}}, PROMPT, False),
    ("systemPrompt", {"agentId": {"startsWith": "7"}}, PROMPT, True),
    # list fields: an element satisfies the operator
    ("todoAdded", {"texts": {"includes": "deploy", "ignoreCase": True}}, TODOS, True),
    ("todoAdded", {"texts": {"equals": "write docs"}}, TODOS, True),
    ("todoAdded", {"texts": {"not": {"includes": "prod"}}}, TODOS, False),
    ("todoAdded", {"texts": {"regex": "^rollback"}}, TODOS, False),
    # numbers and booleans
    ("notifyScheduled", {"delaySeconds": {"equals": 60}}, NOTIFY, True),
    ("notifyScheduled", {"delaySeconds": {"in": [1, 2.5]}}, NOTIFY, False),
    ("interAgentMessage", {"isSubagentReport": {"equals": True}}, REPORT, True),
    ("interAgentMessage", {"isSubagentReport": {"equals": False}}, REPORT, False),
])
def test_each_operator(hook, matcher, context, expected):
    assert holds(hook, matcher, context) is expected


def test_a_boolean_is_not_a_number():
    assert holds("notifyScheduled", {"delaySeconds": {"equals": 1}}, {**NOTIFY, "delaySeconds": 1.0}) is True
    assert check({"delaySeconds": {"equals": 1}}, {**NOTIFY, "delaySeconds": True}).matched is False


def test_no_matcher_always_holds():
    assert check(None, SSH).matched and check({}, SSH).matched


def test_a_failure_says_which_condition_failed():
    verdict = check({"kind": {"equals": "command"}, "command": {"regex": "^rm"}}, SSH)
    assert verdict.matched is False
    assert verdict.failed == 'wanted command matches `^rm`; command is "sudo rm -rf /tmp/x"'
    any_of = check({"any": [{"command": {"includes": "mv"}}, {"kind": {"equals": "read_file"}}]}, SSH)
    assert any_of.failed == 'none of: command includes "mv"; kind is "read_file"'


def test_a_matcher_in_words():
    stated = words.hooks({"userMessageInbound": {"text": {"includes": ["card", "iban"], "ignoreCase": True}},
                          "sshCommandSending": {"command": {"regex": r"\brm\s+-[a-z]*r"}}})
    assert stated == {"userMessageInbound": 'runs when text includes "card" or "iban" (ignoring case)',
                      "sshCommandSending": r"runs when command matches `\brm\s+-[a-z]*r`"}


def test_the_redos_pattern_is_answered_in_linear_time():
    # (a+)+$ on "aaaa...b" takes a backtracking engine 2^n steps; RE2 reads the input once. Not timed
    # (no timings in tests): at n = 100 000 a backtracking engine would never finish, so finishing is the proof.
    matcher = declare({"sshCommandSending": {"command": {"regex": "(a+)+$"}}}, ["sshCommandSending"], HOOKS)
    long_input = {**SSH, "command": "a" * 100_000 + "b"}
    assert check(matcher["sshCommandSending"], long_input).matched is False
    assert check(matcher["sshCommandSending"], {**SSH, "command": "a" * 100_000}).matched is True


def test_a_lone_surrogate_in_the_context_does_not_break_a_pattern():
    assert check({"command": {"regex": "rm"}}, {**SSH, "command": "\ud800 rm"}).matched is True


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)", "(?<!a)b", "a{100000}", "("])
def test_patterns_re2_refuses_are_refused(pattern):
    assert pattern_error(pattern) is not None
    with pytest.raises(MatcherError) as refused:
        declare({"systemPrompt": {"systemPrompt": {"regex": pattern}}}, ["systemPrompt"], HOOKS)
    assert refused.value.path == "middleware.match.systemPrompt.systemPrompt.regex"


@pytest.mark.parametrize(("declared", "path", "message"), [
    ({"systemPrompt": {"text": {"equals": "x"}}}, "middleware.match.systemPrompt.text", "not a field of systemPrompt"),
    ({"nope": {}}, "middleware.match.nope", "not a hook"),
    ({"todoAdded": {"texts": {"equals": "x"}}}, "middleware.match.todoAdded", "no todoAdded handler"),
    ({"systemPrompt": {"agentId": {"equals": 7}}}, "middleware.match.systemPrompt.agentId.equals", "compared as strings"),
    ({"systemPrompt": {"sessionKind": {"between": 1}}}, "middleware.match.systemPrompt.sessionKind.between",
     "not an operator"),
    ({"systemPrompt": {"sessionKind": {"equals": None}}}, "middleware.match.systemPrompt.sessionKind.equals", "never null"),
    ({"systemPrompt": {"sessionKind": {"ignoreCase": "yes", "equals": "x"}}},
     "middleware.match.systemPrompt.sessionKind.ignoreCase", "true or false"),
    ({"systemPrompt": {"all": {}}}, "middleware.match.systemPrompt.all", "non-empty array"),
    ({"systemPrompt": []}, "middleware.match.systemPrompt", "expected an object"),
    ({"systemPrompt": {"sessionKind": 'direct'}}, "middleware.match.systemPrompt.sessionKind", "expected an object"),
])
def test_a_bad_declaration_names_its_path(declared, path, message):
    with pytest.raises(MatcherError) as refused:
        declare(declared, ["systemPrompt"], HOOKS)
    assert (refused.value.path, message in refused.value.message) == (path, True)


def test_type_and_choice_mistakes_are_refused():
    hooks = ["sshCommandSending", "notifyScheduled"]
    for declared, path in [
        ({"sshCommandSending": {"kind": {"equals": "rm"}}}, "middleware.match.sshCommandSending.kind.equals"),
        ({"notifyScheduled": {"delaySeconds": {"includes": "6"}}}, "middleware.match.notifyScheduled.delaySeconds.includes"),
        ({"notifyScheduled": {"delaySeconds": {"equals": True}}}, "middleware.match.notifyScheduled.delaySeconds.equals"),
    ]:
        with pytest.raises(MatcherError) as refused:
            declare(declared, hooks, HOOKS)
        assert refused.value.path == path


def test_a_declaration_is_bounded():
    wide = {"sshCommandSending": {"any": [{"command": {"equals": str(i)}} for i in range(declaring.MAX_VALUES)]}}
    declare(wide, ["sshCommandSending"], HOOKS)   # at the bound: accepted
    deep: dict = {"command": {"equals": "x"}}
    for _ in range(declaring.MAX_DEPTH + 1):
        deep = {"not": deep}
    with pytest.raises(MatcherError, match="nest at most"):
        declare({"sshCommandSending": deep}, ["sshCommandSending"], HOOKS)
    with pytest.raises(MatcherError, match="at most"):
        declare({"sshCommandSending": {"command": {"regex": "a" * (declaring.MAX_PATTERN_CHARS + 1)}}},
                ["sshCommandSending"], HOOKS)
