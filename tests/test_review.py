"""The review session: driven in a real terminal (a pty: keys sent, screen read), the queue
order, skip, undo, resume, and claims that keep concurrent reviewers off each other's
pairs, on SQLite and PostgreSQL."""

from __future__ import annotations

import codecs
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from datetime import datetime, timedelta, timezone
from hashlib import sha256
from pathlib import Path

import pytest
from sqlalchemy import select as sql_select, update

from mmdedup import Platform
from mmdedup.review import queue as feedback
from mmdedup.review.display import display_tokens
from mmdedup.review.screen import HIGHLIGHT, differing, marked_texts
from mmdedup.store.schema import Item as ItemRow
from mmdedup.store.schema import Pair, ReviewClaim

# Four unrelated stories, each with a reworded copy: four medium pairs (the tiers below put
# every reworded copy in medium), best first budget, match, storm, school; plus an exact
# copy (strong, not in the queue).
TOPICS = {
    "budget": ["The city council approved the new budget on Tuesday after a long debate.",
               "Funding for public libraries and parks rises by ten percent next year.",
               "Opposition members criticised the cuts to road maintenance and street lighting.",
               "The mayor said the plan balances growth with the needs of older residents."],
    "match": ["The regional football final ended in a draw after extra time on Saturday evening.",
              "Fans travelled from across the country to watch the match at the national stadium.",
              "Both coaches praised the defence and said the replay would be decided on penalties.",
              "Ticket prices for the replay will be announced by the league next week."],
    "storm": ["A powerful storm brought heavy rain and strong winds to the coast overnight.",
              "Several roads were closed after trees fell across them near the harbour.",
              "Power was cut to thousands of homes and engineers worked through the morning.",
              "Forecasters expect calmer weather to return by the weekend."],
    "school": ["The education board announced a new after school programme for primary pupils.",
               "Parents will be able to register their children online from the first of March.",
               "The programme includes homework help, sports and music lessons twice a week.",
               "Teachers welcomed the plan but asked for more staff to run the sessions."],
}
EDITS = {"budget": [("Tuesday", "Wednesday")],
         "match": [("Saturday", "Sunday"), ("national", "old")],
         "storm": [("heavy", "light"), ("thousands", "hundreds"), ("morning", "night")],
         "school": [("primary", "secondary"), ("first", "end"), ("twice", "three times"),
                    ("more", "extra")]}
ORDER = [(f"{t}-a", f"{t}-b") for t in ("budget", "match", "storm", "school")]
CONFIG = "tier_strong = 0.999\ntier_medium = 0.6\ntier_weak = 0.5\n"


def review_items() -> list[dict]:
    items = []
    for topic, sentences in TOPICS.items():
        text = " ".join(sentences)
        items.append({"id": f"{topic}-a", "title": topic.title(), "text": text})
        for old, new in EDITS[topic]:
            text = text.replace(old, new)
        items.append({"id": f"{topic}-b", "title": f"{topic.title()} (copy)", "text": text})
    items += [{"id": "same-a", "text": "Exactly the same words, twice."},
              {"id": "same-b", "text": "EXACTLY the same words, twice."}]
    return items


def make_review_store(home: Path, db_url: str) -> None:
    (home / "config.toml").write_text(CONFIG)
    with Platform.open(home, db_url) as p:
        p.ingest(review_items())
        medium = [(x["a"], x["b"]) for x in p.pairs("medium") if x["tier"] == "medium"]
        assert medium == ORDER, p.pairs("weak")


@pytest.fixture
def store(home: Path, db_url: str) -> Platform:
    make_review_store(home, db_url)
    with Platform.open(home, db_url) as p:
        yield p


def stored_labels(p: Platform) -> list[tuple[str, str, str, str]]:
    return [(r["a"], r["b"], r["decision"], r["reviewer"]) for r in p.labels()]


def claims(p: Platform) -> list[tuple[int, int, str]]:
    with p.sessions() as s:
        return [tuple(r) for r in s.execute(sql_select(
            ReviewClaim.a_pk, ReviewClaim.b_pk, ReviewClaim.reviewer))]


# --- a real terminal -------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
CLEAR = "\x1b[2J"


class Terminal:
    """`mmdedup` on a pseudo-terminal of rows x cols, as its controlling terminal."""

    def __init__(self, args: list[str], rows: int = 40, cols: int = 120) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {k: v for k, v in os.environ.items()
               if k not in ("NO_COLOR", "COLUMNS", "LINES", "MMDEDUP_REVIEWER", "TERM")}
        env.update(TERM="xterm-256color", PYTHONUNBUFFERED="1")

        def controlling_tty() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        exe = Path(sys.executable).with_name("mmdedup")
        self.proc = subprocess.Popen([str(exe), *args], stdin=slave, stdout=slave, stderr=slave,
                                     env=env, preexec_fn=controlling_tty, close_fds=True)
        os.close(slave)
        self.master = master
        self.raw = ""
        # A character split across two reads must not turn into two U+FFFDs.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def _pump(self, timeout: float) -> bool:
        if not select.select([self.master], [], [], timeout)[0]:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the program ended and closed the terminal
            return False
        if not data:
            return False
        self.raw += self._decoder.decode(data)
        return True

    def frame(self, raw: bool = False) -> str:
        """What the screen shows now: the output since the last clear, styles stripped."""
        last = self.raw.rsplit(CLEAR, 1)[-1]
        return last if raw else _ANSI.sub("", last).replace("\r", "")

    def wait_for(self, *needles: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.frame()
            if all(n in screen for n in needles):
                return screen
            if not self._pump(0.1) and not all(n in self.frame() for n in needles):
                break
        raise AssertionError(f"never saw {needles!r}; the screen:\n{self.frame()}\n"
                             f"exit {self.proc.poll()}")

    def press(self, key: str) -> None:
        os.write(self.master, key.encode())

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._pump(0.1):
            if self.proc.poll() is not None and not select.select([self.master], [], [], 0.2)[0]:
                break
        rc = self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(self.master)
        return rc, _ANSI.sub("", self.raw.rsplit("\x1b[?1049l", 1)[-1]).replace("\r", "")


def review_cmd(home: Path, db_url: str, *extra: str) -> list[str]:
    return ["--home", str(home), "--db", db_url, "review", "--reviewer", "ann", *extra]


def test_review_in_a_terminal_with_undo_quit_and_resume(store: Platform, home: Path,
                                                        db_url: str) -> None:
    started = datetime.now(timezone.utc)
    term = Terminal(review_cmd(home, db_url))
    screen = term.wait_for("budget-a", "budget-b", "[q] quit")
    assert "Budget (copy)" in screen and "4 to go" in screen and "reviewer ann" in screen
    assert "text-reuse" in screen and "medium" in screen and "wjaccard" in screen
    raw = term.frame(raw=True)
    on = r"\x1b\[[\d;]*43m"  # yellow background: the highlight
    assert re.search(on + "Tuesday", raw) and re.search(on + "Wednesday", raw)
    assert not re.search(on + "[^\x1b]*approved", raw)

    term.press("d")
    screen = term.wait_for("match-a", "budget-a ~ budget-b: duplicate", "[q] quit")
    assert "3 to go" in screen and "1 labelled" in screen
    term.press("n")
    term.wait_for("storm-a", "match-a ~ match-b: distinct", "[q] quit")
    term.press("z")
    screen = term.wait_for("match-a", "undone: match-a ~ match-b: distinct", "[q] quit")
    assert "storm-a" not in screen
    assert claims(store)  # the pair on screen is held while it is shown
    term.press("q")
    rc, out = term.finish()
    assert rc == 0, out
    assert "ann: 1 labelled this session (1 duplicate, 0 distinct, 0 unsure)" in out
    assert "3 pairs left" in out

    labels = store.labels()
    assert [(r["a"], r["b"], r["decision"], r["reviewer"]) for r in labels] == [
        ("budget-a", "budget-b", "duplicate", "ann")]
    at = datetime.fromisoformat(labels[0]["created_at"])
    assert started <= at <= datetime.now(timezone.utc)
    assert claims(store) == []  # quit released them

    # A second session resumes at the pair that was undone; 'unsure' moves on.
    term = Terminal(review_cmd(home, db_url))
    screen = term.wait_for("match-a", "match-b", "[q] quit")
    assert "3 to go" in screen and "budget-a" not in screen
    term.press("u")
    term.wait_for("storm-a", "match-a ~ match-b: unsure", "[q] quit")
    term.press("q")
    rc, out = term.finish()
    assert rc == 0 and "0 duplicate, 0 distinct, 1 unsure" in out
    assert stored_labels(store) == [("budget-a", "budget-b", "duplicate", "ann"),
                                    ("match-a", "match-b", "unsure", "ann")]
    # Unsure leaves the pair in the queue for other reviewers, not for ann.
    assert [(q["a"], q["b"]) for q in store.review_queue("ann")] == ORDER[2:]
    assert [(q["a"], q["b"]) for q in store.review_queue("bob")] == ORDER[1:]


def test_scripted_review_reads_lines_and_stops_at_limit(store: Platform, home: Path,
                                                        db_url: str) -> None:
    exe = Path(sys.executable).with_name("mmdedup")
    done = subprocess.run([str(exe), *review_cmd(home, db_url, "--limit", "2")],
                          input="x\nd\n\ns\nn\nd\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "unknown key 'x'" in done.stdout and "skipped match-a ~ match-b" in done.stdout
    assert "stopped at --limit" in done.stdout
    assert stored_labels(store) == [("budget-a", "budget-b", "duplicate", "ann"),
                                    ("storm-a", "storm-b", "distinct", "ann")]
    assert claims(store) == []
    # End of input is a quit.
    done = subprocess.run([str(exe), *review_cmd(home, db_url)], input="", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "quit with 2 pairs left" in done.stdout


# --- the session through the API -------------------------------------------------------


def ids(view) -> tuple[str, str]:  # noqa: ANN001
    return (view.a["id"], view.b["id"])


def test_queue_order_skip_undo_and_tiers(store: Platform) -> None:
    assert [(q["a"], q["b"]) for q in store.review_queue("ann")] == ORDER
    assert [q["tier"] for q in store.review_queue("ann", tiers=["strong"])] == ["strong"]
    with pytest.raises(ValueError, match="unknown tier"):
        store.review_queue("ann", tiers=["middling"])

    with store.review_session("ann") as session:
        assert ids(session.current()) == ORDER[0] and session.remaining() == 4
        session.skip()  # comes back at the end of this session
        assert ids(session.current()) == ORDER[1]
        session.decide("duplicate")
        session.decide("distinct")  # ORDER[2]
        assert session.undo().ids == ORDER[2]
        assert ids(session.current()) == ORDER[2]
        session.decide("unsure")
        assert ids(session.current()) == ORDER[3]
        assert session.undo().ids == ORDER[2]  # the pair on screen comes right after
        assert ids(session.current()) == ORDER[2]
        session.decide("distinct")
        assert ids(session.current()) == ORDER[3]
        session.decide("duplicate")
        assert ids(session.current()) == ORDER[0]  # the skipped one, once more
        session.skip()  # skipped twice: left for the next session
        assert session.current() is None and session.remaining() == 0
    assert session.counts == {"duplicate": 2, "distinct": 1, "unsure": 0}
    assert stored_labels(store) == [
        ("match-a", "match-b", "duplicate", "ann"), ("storm-a", "storm-b", "distinct", "ann"),
        ("school-a", "school-b", "duplicate", "ann")]
    assert claims(store) == []
    with store.review_session("ann") as session:
        assert ids(session.current()) == ORDER[0]  # the next session offers it again
        assert session.undo() is None  # nothing of this session's to undo

    # Decided pairs shape the clusters; the queue follows the latest decision in force.
    assert {"canonical": "match-a", "members": ["match-a", "match-b"]} in store.clusters()
    store.label("storm-a", "storm-b", decision="duplicate", reviewer="bob")
    store.label("storm-b", "storm-a", decision="unsure", reviewer="cy")  # decides nothing
    assert {"canonical": "storm-a", "members": ["storm-a", "storm-b"]} in store.clusters()


def test_crashed_session_claims_expire_and_own_claims_resume(store: Platform) -> None:
    ann = store.review_session("ann")
    assert ids(ann.current()) == ORDER[0]  # held by ann, never released (a crash)
    with store.review_session("bob") as bob:
        assert ids(bob.current()) == ORDER[1]
    with store.review_session("ann") as again:  # ann's own claim is hers again
        assert ids(again.current()) == ORDER[0]
    ann = store.review_session("ann")
    assert ids(ann.current()) == ORDER[0]
    with store.sessions.begin() as s:  # time passes
        s.execute(update(ReviewClaim).values(
            expires_at=datetime.now(timezone.utc) - timedelta(seconds=1)))
    with store.review_session("bob") as bob:
        assert ids(bob.current()) == ORDER[0]
        bob.decide("distinct")
    # ann's stale view: her decision is still recorded, the latest one in force.
    ann.decide("duplicate")
    assert stored_labels(store)[-1] == ("budget-a", "budget-b", "duplicate", "ann")
    assert claims(store) == []


def _concurrent_store(home: Path, db_url: str, n_pairs: int) -> list[tuple[int, int]]:
    """A store of 2 * n_pairs items and n_pairs medium pairs, rows written directly (the
    claims are under test here, not the scoring)."""
    with Platform.open(home, db_url) as p:
        with p.sessions.begin() as s:
            rows = [ItemRow(id=f"i{k}", text=f"item {k}", content_key=sha256(f"k{k}".encode()).hexdigest(),
                            fingerprint=sha256(f"f{k}".encode()).hexdigest()) for k in range(2 * n_pairs)]
            s.add_all(rows)
            s.flush()
            pks = sorted(r.pk for r in rows)
            keys = [(pks[2 * k], pks[2 * k + 1]) for k in range(n_pairs)]
            s.add_all(Pair(a_pk=a, b_pk=b, score=0.85 - k * 0.001,
                           kind="text-reuse", signals={"text": 0.85})
                      for k, (a, b) in enumerate(keys))
    return keys


def test_concurrent_reviewers_never_get_the_same_pair(home: Path, db_url: str) -> None:
    keys = _concurrent_store(home, db_url, 40)
    reviewers = ["r0", "r1", "r2", "r3"]
    got: dict[str, list[tuple[int, int]]] = {r: [] for r in reviewers}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(reviewers), timeout=60)
    # An engine each, as separate processes would have (opened here: migrating on open is
    # not for threads).
    platforms = {r: Platform.open(home, db_url) for r in reviewers}

    def work(reviewer: str) -> None:
        try:
            barrier.wait()
            while True:
                taken = feedback.claim(platforms[reviewer].sessions, reviewer, ("medium",),
                                       platforms[reviewer].settings.tier_thresholds, timedelta(minutes=5), exclude=got[reviewer])
                if not taken:
                    return
                got[reviewer].extend(taken)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in reviewers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        for p in platforms.values():
            p.close()
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    everything = [k for r in reviewers for k in got[r]]
    assert len(everything) == len(set(everything)) == len(keys)  # no pair twice, none lost
    assert set(everything) == set(keys)
    with Platform.open(home, db_url) as p:
        held = {(a, b): r for a, b, r in claims(p)}
    assert held == {k: r for r in reviewers for k in got[r]}


def test_two_review_sessions_at_once(store: Platform, home: Path, db_url: str) -> None:
    with Platform.open(home, db_url) as other:
        ann, bob = store.review_session("ann"), other.review_session("bob")
        seen = []
        for _ in range(2):
            a, b = ann.current(), bob.current()
            assert a.key != b.key
            seen += [ids(a), ids(b)]
            ann.decide("duplicate")
            bob.decide("distinct")
        assert sorted(seen) == sorted(ORDER)
        assert ann.current() is None and bob.current() is None
        ann.close()
        bob.close()
    assert sorted(stored_labels(store)) == sorted(
        (a, b, d, r) for (a, b), (d, r) in zip(seen, [("duplicate", "ann"), ("distinct", "bob")] * 2))


# --- the screen's pieces ---------------------------------------------------------------


def test_differing_words_use_the_tokenizer_and_ignore_moved_passages() -> None:
    a = "北京市政府今天宣布，新的地铁线路将于明年年底开通。"
    b = "北京市政府昨天宣布，新的地铁线路将于明年年底开通。"
    ta, tb = display_tokens(a), display_tokens(b)
    changed_a, changed_b = differing([t[2] for t in ta], [t[2] for t in tb])
    assert [a[s:e] for (s, e, _), c in zip(ta, changed_a) if c] == ["今天"]
    assert [b[s:e] for (s, e, _), c in zip(tb, changed_b) if c] == ["昨天"]

    p1 = "The first paragraph talks about the harbour bridge and its cost."
    p2 = "The second paragraph is about the weather this weekend."
    x, y = f"{p1}\n\n{p2}", f"{p2}\n\n{p1}\n\nA NEW closing line."
    text_x, text_y = marked_texts(x, y, 60, 20)
    marked = lambda t: [t.plain[s.start:s.end] for s in t.spans if s.style == HIGHLIGHT]  # noqa: E731
    assert marked(text_x) == [] and marked(text_y) == ["A NEW closing line"]
    # Case and width folding are not differences; an ESC in a text never reaches the
    # screen: it is shown as the escape \x1b.
    text_x, text_y = marked_texts("Ｈｅｌｌｏ World \x1b[2J", "hello WORLD", 60, 20)
    assert marked(text_x) == ["x1b[2J"] and marked(text_y) == []
    assert "\x1b" not in text_x.plain and text_x.plain.endswith("World \\x1b[2J")


def test_long_texts_are_cut_around_the_first_difference() -> None:
    filler = " ".join(f"word{i}" for i in range(400))
    a, b = filler + " original ending here", filler + " changed ending here"
    text_a, _ = marked_texts(a, b, 40, 10)
    assert text_a.plain.startswith("… ") and "original" in text_a.plain
    assert len(text_a.plain) < 600
    text_a, _ = marked_texts("changed " + filler, "other " + filler, 40, 10)
    assert text_a.plain.startswith("changed") and text_a.plain.endswith(" characters]")


def test_postgresql_passes_over_rows_another_session_is_claiming(store: Platform,
                                                                 db_url: str) -> None:
    """FOR UPDATE SKIP LOCKED: while another transaction holds the head pair's row, a claim
    takes the next pair at once instead of waiting."""
    if not db_url.startswith("postgresql"):
        pytest.skip("row locks are PostgreSQL's")
    with store.sessions() as s:
        first, second = [tuple(r) for r in s.execute(feedback.queue_select(
            "ann", ("medium",), store.settings.tier_thresholds, datetime.now(timezone.utc)).limit(2))]
    with store.sessions.begin() as locker:
        locker.execute(sql_select(Pair).where(Pair.a_pk == first[0], Pair.b_pk == first[1])
                       .with_for_update())
        started = time.monotonic()
        taken = feedback.claim(store.sessions, "ann", ("medium",), store.settings.tier_thresholds,
                               timedelta(minutes=5))
        assert time.monotonic() - started < 5
    assert taken == [second]
