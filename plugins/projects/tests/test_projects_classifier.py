"""The obligation classifier and its labelled corpus (the numbers ``make bench`` prints)."""

from __future__ import annotations

from importlib import resources

import pytest
from agent_link_projects.obligations import analyse, referenced_thread_ids, slug


def corpus() -> list[tuple[bool, str, str]]:
    text = resources.files("agent_link_projects").joinpath("data/obligation_corpus.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    return [(label == "1", split, sentence) for label, split, sentence in rows]


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


def _scores(split: str) -> tuple[float, float]:
    rows = [(label, analyse(s)["hasObligation"]) for label, sp, s in corpus() if sp == split]
    tp = sum(1 for label, pred in rows if label and pred)
    fp = sum(1 for label, pred in rows if pred and not label)
    fn = sum(1 for label, pred in rows if label and not pred)
    return tp / (tp + fp), tp / (tp + fn)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_precision_and_recall(split: str) -> None:
    precision, recall = _scores(split)
    assert precision >= 0.95 and recall >= 0.95, (precision, recall)


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


@pytest.mark.parametrize("name,expected", [("Auth API / v2!", "auth-api-v2"), ("---", "dependency"), ("x" * 60, "x" * 48),
                                           ("Ünïcode name", "n-code-name")])
def test_slug(name: str, expected: str) -> None:
    assert slug(name) == expected
