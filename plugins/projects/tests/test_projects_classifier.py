"""The obligation classifier and its labelled corpus (the numbers ``make bench`` prints)."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from agent_link_projects.obligations import _nicknames, analyse, referenced_thread_ids, slug


def corpus() -> list[tuple[bool, str, str]]:
    text = resources.files("agent_link_projects").joinpath("data/obligation_corpus.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    # a literal \n in a sentence is a line break (multi-line texts)
    return [(label == "1", split, sentence.replace("\\n", "\n")) for label, split, sentence in rows]


def test_corpus_shape() -> None:
    rows = corpus()
    assert len(rows) >= 150 and len({s for _, _, s in rows}) == len(rows)
    for split in ("train", "heldout"):
        part = [label for label, sp, _ in rows if sp == split]
        assert sum(part) * 2 == len(part)  # half each way
    assert sum(1 for _, sp, _ in rows if sp == "heldout") >= 50
    negatives = " ".join(s.lower() for label, _, s in rows if not label)
    for word in ("callback", "handoff", "another thread", "blocked", "return path", "waiting"):
        assert word in negatives, word  # hard negatives reuse the trigger words


def held_out_by_lead(name: str = "obligation_heldout_lead.jsonl") -> list[tuple[bool, str]]:
    """An outside held-out set (data/obligation_heldout_lead.txt says who wrote them)."""
    text = resources.files("agent_link_projects").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return [(row["commits"], row["text"]) for row in map(json.loads, text.splitlines()) if row]


def _measure(rows: list[tuple[bool, str]]) -> tuple[float, float]:
    scored = [(label, analyse(s)["hasObligation"]) for label, s in rows]
    tp = sum(1 for label, pred in scored if label and pred)
    fp = sum(1 for label, pred in scored if pred and not label)
    fn = sum(1 for label, pred in scored if label and not pred)
    return tp / (tp + fp), tp / (tp + fn)


def _scores(split: str) -> tuple[float, float]:
    return _measure([(label, s) for label, sp, s in corpus() if sp == split])


@pytest.mark.parametrize("split", ["train", "heldout", "widened", "train-classifier", "train-classifier2", "train-set3-kinds",
                                   "train-classifier5"])
def test_precision_and_recall(split: str) -> None:
    precision, recall = _scores(split)
    assert precision >= 0.95 and recall >= 0.95, (precision, recall)


def test_outside_held_out_set_keeps_its_measured_figures() -> None:
    # measured once when the issue-30 table was final (0.973 / 0.857), once when its second round
    # was (0.975 / 0.929), and after the third (1.000 / 1.000); the third round read its misses to
    # find the kinds of commitment the table missed (not its phrases), so it is no longer blind:
    # this guards against losing ground, the blind measure is the lead's third set
    rows = held_out_by_lead()
    assert len(rows) == 77 and sum(label for label, _ in rows) == 42
    precision, recall = _measure(rows)
    assert precision >= 0.98 and recall >= 0.98, (precision, recall)


def test_second_outside_held_out_set_keeps_its_measured_figures() -> None:
    # written after the first set was used, measured once before the second round of tuning
    # (1.000 / 0.526), once after it (1.000 / 0.789) and after the third (1.000 / 1.000; its misses
    # read for their kinds, as for the first set)
    rows = held_out_by_lead("obligation_heldout_lead2.jsonl")
    assert len(rows) == 73 and sum(label for label, _ in rows) == 38
    precision, recall = _measure(rows)
    assert precision >= 0.98 and recall >= 0.98, (precision, recall)


def test_third_outside_held_out_set_keeps_its_measured_figures() -> None:
    # written blind by a helper engineer; 0.900 / 1.000 when first measured (commit 45ae89e), 1.000 / 1.000
    # after the fourth round, which covered the kinds of its five false positives (obligation_heldout_lead.txt)
    rows = held_out_by_lead("obligation_heldout_3.jsonl")
    assert len(rows) == 90 and sum(label for label, _ in rows) == 45
    precision, recall = _measure(rows)
    assert precision >= 0.98 and recall >= 0.98, (precision, recall)


def test_fourth_set_keeps_its_measured_figures() -> None:
    # written blind by a helper engineer: 0.706 / 0.720 before the third round, 0.824 / 0.840 after the
    # fourth; the fifth round read its errors for their kinds (so it is no longer blind): 1.000 / 1.000;
    # this guards against losing ground, the blind measure is a fifth set (obligation_heldout_lead.txt)
    rows = held_out_by_lead("obligation_heldout_4.jsonl")
    assert len(rows) == 100 and sum(label for label, _ in rows) == 50
    precision, recall = _measure(rows)
    assert precision >= 0.98 and recall >= 0.98, (precision, recall)


def test_fifth_set_keeps_its_measured_figures() -> None:
    # written blind by the lead: 0.810 / 0.940 before the fifth round, 0.857 / 0.960 after it, measured
    # once (obligation_heldout_lead.txt); this guards against losing ground
    rows = held_out_by_lead("obligation_heldout_5.jsonl")
    assert len(rows) == 100 and sum(label for label, _ in rows) == 50
    precision, recall = _measure(rows)
    assert precision >= 0.85 and recall >= 0.96, (precision, recall)


def test_third_round_dev_set_keeps_its_measured_figures() -> None:
    # dev-classifier2: written by the third round's author after its ninth batch, never tuned on;
    # 0.906 / 0.967 when first measured, 0.967 / 0.967 when the round was final (obligation_corpus.tsv)
    precision, recall = _scores("dev-classifier2")
    assert precision >= 0.96 and recall >= 0.93, (precision, recall)


def test_fifth_round_dev_set_keeps_its_measured_figures() -> None:
    # dev-classifier5: written by the fifth round's author after its fourth batch, never tuned on; 0.909 / 1.000
    # when measured (the table before the round: 0.870 / 1.000; obligation_corpus.tsv)
    precision, recall = _scores("dev-classifier5")
    assert precision >= 0.9 and recall >= 0.95, (precision, recall)


def test_fifth_round_final_dev_set_keeps_its_measured_figures() -> None:
    # dev-classifier5b: written after the fifth round's thirteenth batch, never tuned on: 0.938 / 1.000 (0.933 / 0.933
    # with the table before the round)
    precision, recall = _scores("dev-classifier5b")
    assert precision >= 0.93 and recall >= 0.95, (precision, recall)


@pytest.mark.parametrize("text", [
    "Once codex:019b7c2e-1a4d-7e20-9c1f-3d5e6f708192 finishes, I'll merge its branch into mine.",
    "I asked the reviewer to look at the diff and will apply its comments once it responds.",
    "I handed the flaky test to another agent and I'm waiting to hear back before touching CI.",
    "I asked claude:review-7 whether the lock order is safe and will change the code according to what it says.",
])
def test_commitments_to_other_agents_named_in_new_ways(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is True, result


@pytest.mark.parametrize("text", [
    "The role:reviewer address resolves to whichever session holds the role.",  # two references, no dependency
    "codex:019d0e1f-2a3b-7c4d-8e5f-60718293a4b5 finished and its changes are merged.",
    "I set codex:model to gpt-5 in config.toml.",
    "The other session cookie is cleared when you log out.",
])
def test_references_alone_do_not_commit(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is False, result


@pytest.mark.parametrize("text", [
    "codex:019f2c3d-4e5f-7a6b-8c9d-0e1f2a3b4c5d is rewriting the parser. I'll take it from there.",
    "Pending claude:arch-1's answer on the storage format, the importer stays as it is.",
    "If the other session agrees with the new name I'll rename it everywhere.",
    "team:data owes me the cleaned CSV; the charts wait for it.",
    "Question for codex:5e6f7a8b9c: which port does your server bind? I need it before I write the proxy config.",
    "Refactor is merged. Next I'm stuck: the tester session hasn't reported on the Windows run yet.",
    "- [ ] wire the webhook once codex:4c5d6e7f80 exposes the endpoint",
    "I kicked off a subagent to bisect the regression and will fix the commit it points to.",
])
def test_commitments_in_second_round_phrasings(text: str) -> None:
    # issue 30, second round: past-tense asks, "take it from there", "pending X's answer",
    # conditionals, "owes me", questions put to an agent, the dependency in a later sentence, bullets
    result = analyse(text)
    assert result["hasObligation"] is True, result


@pytest.mark.parametrize("text", [
    "No need to wait for codex:3344556677; it is working on something unrelated and my change does not touch it.",
    "The reviewer is waiting on me, not the other way round, so I'm sending the patch now.",
    "I asked codex:7a8b9c0d1e to regenerate the fixtures and it did; the suite passes now.",
    "I'll answer codex:0a1b2c3d4e's question about the port once I've checked the config.",
    "I asked the user to run the migration; I'll continue when they confirm.",
    "The orchestrator sends heartbeats every 30 s to each worker process.",
])
def test_negated_reversed_or_finished_dependencies_do_not_commit(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is False, result


@pytest.mark.parametrize("text", [
    # agents named in new ways: a fork, a spawned helper, the host as a party, a thread named by its work
    "I started a fork on the cheaper model to try the other index layout; I'll keep whichever layout benchmarks faster.",
    "The helper I spawned is bisecting the regression, and the fix I write depends on the commit it lands on.",
    "Holding the release until Claude finishes the changelog in the other terminal.",
    "The thread handling the storage port has the schema files open, so my migration waits until it hands them over.",
    "Pinged opencode:ses_7kq2 about the proxy settings; I'll configure nginx from its reply.",
    # dependencies in new words: sequencing, a held state, the writer's work built on the agent's output
    "Sequenced behind the packaging agent: it builds the wheels, then I publish them.",
    "The importer stays stubbed while the schema session settles the column types.",
    "My dashboards read the metrics the telemetry agent is defining, so they change whenever it publishes a new set.",
    "Plan: 1) ask role:dba for the slow-query log 2) add the indexes it points at.",
    "- [ ] wire the retry policy (asked the resilience agent for the limits, not back yet)",
    "I'm last in line here: the schema worker migrates first, then the API agent, then me.",
    # one step done, the next still ahead
    "The reviewer agent approved the first PR and I merged it; now I'm waiting for it to review the second.",
])
def test_commitments_in_third_round_phrasings(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is True, result


@pytest.mark.parametrize("text", [
    # finished dependencies reported in the past, nothing ahead
    "I merged the client after team:api published the schema, and the release went out.",
    "Once the fixtures agent had regenerated the snapshots, I reran the suite and it was green.",
    "Got the threat model from the security session this morning and wrote the hardening section.",
    # generic or described agents, a rule quoted, routine behaviour, a git fork, the host as a product
    "Agent-link lets an agent wait for another agent's answer before it continues.",
    'The old runbook said "wait for the release agent to tag before deploying", but tagging is automatic now.',
    "The docs agent regenerates the API reference on every release.",
    "I pushed the fix to my fork and opened a pull request upstream.",
    "Codex reads AGENTS.md when it starts a new thread.",
    # reversed: the other agent waits on the writer
    "codex:6b7c8d9e0f is on standby for my schema; it starts its migration when I push.",
    "I sent the numbers to the planner agent for the record; it doesn't need to reply.",
    # negated and hypothetical waits, a system described with no first person
    "I'm not waiting on claude:fmt-2 any more; I formatted the files myself.",
    "Had the schema session still been running, I would have had to wait for it.",
    "The coordinator agent collects every worker's result before it writes the summary.",
])
def test_finished_generic_or_reversed_dependencies_do_not_commit(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is False, result


@pytest.mark.parametrize("text", [
    # a past block resolved: "previously/was blocked ... but it delivered", a block marked resolved
    "Previously blocked on the frontend thread for the TS types, but it delivered them this morning. Fetch wrappers are updated.",
    "Blocked on role:dba — resolved: it granted the read replica and the report runs nightly now.",
    # struck through or checked off: done
    "~~Blocked on the infra agent to rotate staging creds~~ Done: it rotated them at 14:10. Deploy script tested and working.",
    "- [x] get the security agent's sign-off\n- [x] merge\n- [ ] write the release note (me)",
    # a hand-off let go, the writer's part done with another agent downstream
    "Handed off the docs cleanup to worker 2. That's entirely its task now; I'm moving on to the parser and won't be revisiting the docs.",
    "The search thread will do the final merge of the index shards. I've written shards 0-7 and my part is complete.",
    "After I push the schema, the API agent regenerates the client. My part ends at the push.",
    "Handing the release notes over to claude:notes-2 for good. It writes and publishes them itself; there is nothing I need back.",
    "The QA agent will run the exploratory pass after my release goes out; I'm closing this session.",
    "Blocked on codex:6f7e8d9c0b earlier for the lockfile; it regenerated it, I rebased, and CI is green.",
    # quoted as an example, or another party's line
    'Example from the README, quoted for reference: "agent A: I\'ll merge once agent B finishes the schema." That\'s the pattern.',
    'The reviewer session wrote back: "I\'ll hold the merge until the docs agent finishes." Good to know for the schedule.',
    'Sample transcript line: "assistant: I\'ll resume once the sub-agent returns its findings."',
])
def test_resolved_let_go_or_quoted_dependencies_do_not_commit(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is False, result


@pytest.mark.parametrize("text", [
    # the same kinds with something still ahead for the writer
    "Was blocked on codex:4e5f6a7b8c for the types, but it delivered them; now I'm waiting on it for the client stubs too.",
    "~~Blocked on the docs session~~ Now blocked on the schema agent instead: it has to publish the column types before I can write the importer.",
    "- [x] draft endpoint\n- [ ] merge once claude:sec-2 approves the auth change",
    "Passed the triage to role:qa. I'm moving on to the parser meanwhile, and will merge its fixes once it reports back.",
    "My part is done; I'm staying on the ticket until the QA session confirms the repro is gone.",
    "After I push the schema, the API agent regenerates the client, then I run the e2e suite against it.",
    "Handing the release notes to claude:notes-2; I need its draft back before I can tag the release.",
    "The QA agent is doing an exploratory pass on my release; I'm keeping the session open to fix whatever it reports.",
    'I said to codex:ab12cd34ef: "Let me know when the fixtures are regenerated." Holding the snapshot update till then.',
])
def test_the_same_kinds_with_a_step_still_ahead_commit(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is True, result


# the fifth round's kinds, each in words of its own (not the set-4 texts they were found in)
@pytest.mark.parametrize("text", [
    # who: a name@project address, a helper, a numbered agent, a copy of the writer, nicknames the text gives
    "Holding the release until qa@mobile confirms the smoke run.",
    "My helper is profiling the importer; I'll pick the chunk size from whatever it measures.",
    "Step 4 waits on worker-7's fixture dump.",
    "I forked a copy of myself to try the other index layout and will keep the faster one when it reports back.",
    "Kit (my docs helper) is rewriting the install page. I'll link the tutorial to it once Kit is done.",
    "Roles: Mo = parser, Lu = me\n1. Mo emits the new AST.\n2. Lu ports the linter onto Mo's AST.",
    # depends: a plan step pinging it, several agents reporting, the writer's step built on its output, held work
    "Next: message the infra agent for the bucket names, then write the IAM policy.",
    "Three helpers are scanning the services; the summary waits until all three report back.",
    "Sent the crash dump to the triage session. The hot frame it points at is what I fix.",
    "Forwarded the ticket to the billing agent; keeping my refund patch unmerged in case it needs a schema change.",
    "Blocked until @schema-bot regenerates the models.",
    "Started two Claude sessions on the two drafts and I'm collecting their diffs before picking one.",
    "Blocked by:\n- the nightly build\n- role:perf for the baseline numbers",
    "Reviewer: role:api-review. Status: in review. My next step: fold in its comments.",
    "The search thread and I share the index format; it's drafting it and I'll code against it when it's pushed.",
    "Still need the billing session to publish the invoice events before my consumer can run.",
    "Your turn, claude:ux-2: choose the palette and I'll theme the app with your choice.",
    "The minute thread 7a8b9c0d1e2f is done, I run the load test.",
])
def test_fifth_round_kinds_commit(text: str) -> None:
    result = analyse(text)
    assert result["hasObligation"] is True, result
    assert result["kinds"]["agent"], result


@pytest.mark.parametrize("text,cancel", [
    ("Do I need the planner agent's input here? Nope, the task list is fixed, so I'm coding it now.", "not-after-all"),
    ("I was going to ask the schema agent about nullability, but the DDL answers it, so I made the column NOT NULL.", "not-after-all"),
    ("Takeaway for next time: ping the cache agent before invalidating keys. Today it made no difference.", None),
    ("The coordinator is waiting for every worker's report before it merges; I'm worker 3 and mine is in.", "others-wait"),
    ("The deploy agent said it will wait for the orchestrator before rolling out.", "others-wait"),
    ("Thread 5e6f7a8b wants my API types before it continues; pushing them in a minute.", "reversed-or-generic"),
    ("Agent C asked me to hold until its schema lands. It landed an hour ago, so I'm proceeding.", "proceeding"),
    ("Done on my side. Passed the flaky test to role:qa; it owns that now and I have nothing queued behind it.", "writer-done"),
    ("Excerpt from the other session's log: \"Blocked until team:ops approves.\" Noting it for the record.", None),
    ("The other worker and I split the files, so neither of us needs to wait on the other.", "not-after-all"),
    ("I could wait for claude:docs-3's glossary, but the page doesn't need it, so I published it.", "not-after-all"),
])
def test_fifth_round_cancellations_do_not_commit(text: str, cancel: str | None) -> None:
    result = analyse(text)
    assert result["hasObligation"] is False, result
    if cancel is not None:
        assert cancel in result["kinds"]["cancel"] and cancel in result["note"], result


@pytest.mark.parametrize("text,commits", [
    ("| step | owner | blocked by |\n|---|---|---|\n| schema | data agent | - |\n| loaders | me | schema |", True),
    ("| step | owner | blocked by |\n|---|---|---|\n| schema | me | - |\n| loaders | data agent | schema |", False),
    ("| Item | Who | Status |\n|--|--|--|\n| Fixtures | team:qa-bot | running |\n| Snapshot tests | me | waiting for fixtures |", True),
    ("| Item | Who | Status |\n|--|--|--|\n| Fixtures | team:qa-bot | done |\n| Snapshot tests | me | done |", False),
])
def test_tables_are_read_row_by_row(text: str, commits: bool) -> None:
    assert analyse(text)["hasObligation"] is commits, analyse(text)


def test_tables_without_an_owner_column_stay_as_they_are() -> None:
    from agent_link_projects.obligations import _tables_as_sentences

    table = "| a | b |\n| 1 | 2 |"
    assert _tables_as_sentences(table) == table


@pytest.mark.parametrize("text", [
    "The mapping helper's report is in notes/map.md; schema updated to match.",
    "Message from the build session, pasted verbatim: \"Waiting on role:infra before I deploy.\"",
    "Blocked by:\n- the nightly build\n- [x] role:perf for the baseline numbers",
])
def test_arrived_output_pasted_notes_and_checked_items_do_not_commit(text: str) -> None:
    assert analyse(text)["hasObligation"] is False, analyse(text)


@pytest.mark.parametrize("text", [
    "The helper function retries the socket until the agent process exits.",
    "Mail alice@example.com the report once CI is green.",
    "The @pytest.mark.slow tests wait for the fixture server until it answers.",
    "The UI thread and I/O thread both wait on the event queue until it drains.",
])
def test_helper_functions_and_email_addresses_are_not_agents(text: str) -> None:
    assert analyse(text)["hasObligation"] is False


def test_nicknames_a_text_gives() -> None:
    text = "Plan (agents: Ada = schema, Bo = me). Scout (my research helper) reads the docs; a helper (call it Pip) runs tests."
    assert _nicknames(text) == ({"ada", "scout", "pip"}, {"bo"})
    assert _nicknames("The Step (a plan) has no agents.") == (set(), set())
    assert _nicknames("Riley, my review helper, has it; the docs agent, Kai, too.") == ({"riley", "kai"}, set())
    # a sentence's opening word before an agent is not its name
    assert _nicknames("Yesterday, the reviewer agent approved it. However, my helper said no.") == (set(), set())


def test_a_quoted_message_to_the_agent_still_counts() -> None:
    # quotes mentioned as rules or examples are dropped; a message the writer sent is not
    result = analyse('I told codex:4d5e6f7a8b "ping me when the index is built" and I am holding the query work until it does.')
    assert result["hasObligation"] is True, result


def test_nul_in_the_text_is_not_taken_for_an_agent_reference() -> None:
    # agent references are marked with NUL internally; one in the input must not fake one
    plain = analyse("The agent docs moved. I'll merge once \x00 says ok.")
    assert "agent-condition" not in plain["matchedPhrases"], plain


@pytest.mark.parametrize("text", ["callback", "handoff", "Registered the callback.", "The handoff is done.", ""])
def test_bare_trigger_words_do_not_count(text: str) -> None:
    assert analyse(text)["hasObligation"] is False


def test_analysis_fields() -> None:
    result = analyse("Blocked on thread 019a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8 until it publishes the schema.")
    assert result["hasObligation"] is True and result["score"] >= result["threshold"] == 1.0
    assert result["referencedThreadIds"] == ["019a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"]
    assert result["matchedPhraseCount"] == len(result["matchedPhrases"]) and "blocked-on" in result["matchedPhrases"]


def test_thread_ids_after_the_word_thread() -> None:
    assert referenced_thread_ids("wait for thread 7F3E9A12 and thread codex:abcdef0123") == ["7f3e9a12", "abcdef0123"]


def test_thread_ids_in_codex_addresses() -> None:
    assert referenced_thread_ids("once codex:5D6E7F80AA is done, and claude:ops-3") == ["5d6e7f80aa"]


@pytest.mark.parametrize("name,expected", [("Auth API / v2!", "auth-api-v2"), ("---", "dependency"), ("x" * 60, "x" * 48),
                                           ("Ünïcode name", "n-code-name")])
def test_slug(name: str, expected: str) -> None:
    assert slug(name) == expected
