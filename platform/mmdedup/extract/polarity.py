"""Decision words: a built-in polarity lexicon, and the spots where two texts decide apart.

Why: two notices identical but for "不予批准" / "给予批准" (or "shall be granted" /
"shall not be granted") share every other word, so every sketch calls them duplicates, and
no number of TF-IDF tricks can tell: the one word that differs is the whole meaning. A
reviewer can teach that (learn/weights.py), but only after the pairs were merged. So the
product ships the decision and negation words of Chinese and English with their polarity:
approving words (批准, 准予, grant, approved) +1, refusing ones (驳回, 撤销, reject, revoke) -1,
negators (不, 未, not, never) -1, and a phrase's polarity is the product of its words' ("不予
批准": -1 x +1 = -1; "not rejected": +1).

Where: a decision changes at one spot of a text, and the rest of the text around it stays.
Every token that is a lexicon word (or a word reviewers made decisive) is "marked"; the
unmarked tokens are the text's frame, and each gap between two frame tokens is keyed by
the two frame tokens on each side (`DecisionSpots`). Two texts decide apart where a gap
with the same key holds phrases of opposite polarity, an empty gap counting as +1 (the
affirmative: "shall be granted" against "shall not be granted"), or where lexicon phrases
of opposite polarity follow the same two frame words (or precede them) in both texts.
Comparing spots, not word counts, is what keeps true duplicates whole:

- a repost that says 准予批准 for 给予批准 holds a phrase of the same polarity at that spot:
  not a change, however strongly a reviewer made 给予 decisive;
- a repost cut short, or with a sentence dropped, loses its negators with their frame:
  a gap whose key the other text lacks is not compared (no word vetoes a text for
  lacking it);
- sentences shuffled keep every gap's frame.

A rewrite that changes the frame around a decision too ("the committee approved" / "the
panel rejected") is not seen here: the sketches already score such a pair lower.

Learned words (multiplier > 1, their share from learn/weights.py) are marked too: a spot
where the two texts hold different learned words, that the lexicon does not find of equal
polarity on both sides, costs the pair a share of its similarity that grows with the
labels' evidence and stays below 1.

Tokens are the 64-bit token hashes the sketches are made from (extract/tokens.py drops
stop words, so "shall not be granted" is [shall, not, granted]); everything per text is
numpy over its tokens, and only the few marked gaps are handled one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import re
import unicodedata

import numpy as np

from .hashing import hash_strings
from .term_weights import WordWeights
from .tokenbatch import TokenBatch

LEXICON_VERSION = "pol1"

# Approving, allowing, restoring, validating: +1.
POSITIVE_ZH = """
批准 准予 给予 同意 允许 许可 核准 通过 恢复 合格 有效 合法 符合 受理 认可 确认 准许 授予 录取
中标 胜诉 维持 赞成 支持 生效 具备 达标 接受 采纳 通过审核 审核通过 核发 颁发 予以认定 认定 入选
获批 放行 解封 解禁 开放 启用 续期 延续
""".split()
# Refusing, revoking, stopping, invalidating: -1.
NEGATIVE_ZH = """
不予 驳回 撤销 暂停 禁止 拒绝 否决 取消 吊销 终止 中止 撤回 注销 停止 叫停 反对 败诉 落选 无效 非法
失效 超标 严禁 否定 拒不 不准 不宜 关闭 查封 封存 暂扣 扣留 收回 退回 作废 停业 停产 责令停止
暂停营业 违法 违规 不实 落榜 流标 废标 禁用 停用
""".split()
# Negation: -1, flipping the phrase they stand in.
NEGATORS_ZH = """
不 未 没 没有 无 非 勿 别 莫 否 不得 不能 不可 不会 无权 不再 未能 未经 毋 无须 无需 不必 不用
""".split()

POSITIVE_EN = """
approve approves approved approving approval grant grants granted granting accept accepts accepted
accepting acceptance allow allows allowed allowing permit permits permitted permitting authorise
authorises authorised authorize authorizes authorized authorisation authorization uphold upholds
upheld agree agrees agreed passed confirm confirms confirmed admit admits admitted
restore restores restored resume resumes resumed valid lawful legal eligible qualified compliant
approvable consent consents consented endorse endorses endorsed award awards awarded win wins won
acquit acquits acquitted affirm affirms affirmed reinstate reinstates reinstated renew renews renewed
""".split()
NEGATIVE_EN = """
deny denies denied denying denial reject rejects rejected rejecting rejection refuse refuses refused
refusing refusal revoke revokes revoked revoking revocation suspend suspends suspended suspending
suspension cancel cancels cancelled canceled cancelling cancellation prohibit prohibits prohibited
prohibition ban bans banned forbid forbids forbidden forbade dismiss dismisses dismissed dismissal
decline declines declined veto vetoes vetoed terminate terminates terminated termination withdraw
withdraws withdrawn withdrew invalid unlawful illegal ineligible unqualified noncompliant fail fails
failed failing disapprove disapproves disapproved disagree disagrees disagreed overturn overturns
overturned quash quashes quashed annul annuls annulled void convict convicts convicted lose loses
lost halt halts halted barred disallow disallows disallowed
""".split()
NEGATORS_EN = """
not no never none nor neither cannot can't don't doesn't didn't won't wouldn't shouldn't couldn't
isn't aren't wasn't weren't hasn't haven't hadn't mustn't needn't shan't without
""".split()


@dataclass(frozen=True)
class Lexicon:
    """Marked token hashes (sorted) and each one's polarity (+1 or -1)."""

    keys: np.ndarray  # uint64, sorted
    sign: np.ndarray  # int8

    def signs(self, hashes: np.ndarray) -> np.ndarray:
        """Polarity of each token: +1 / -1 for lexicon words, 0 for every other token."""
        if not len(self.keys):
            return np.zeros(len(hashes), np.int8)
        at = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
        return np.where(self.keys[at] == hashes, self.sign[at], 0).astype(np.int8)


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    words = {**{w: 1 for w in POSITIVE_ZH + POSITIVE_EN},
             **{w: -1 for w in NEGATIVE_ZH + NEGATIVE_EN + NEGATORS_ZH + NEGATORS_EN}}
    keys = hash_strings(list(words))
    order = np.argsort(keys)
    return Lexicon(keys[order], np.array(list(words.values()), np.int8)[order])


@dataclass(frozen=True)
class Learned:
    """Words reviewers made decisive (multiplier > 1): sorted hashes and their shares of
    a pair's similarity, already scaled to at most `most` (never the whole)."""

    keys: np.ndarray
    share: np.ndarray
    words: tuple[str, ...] = ()

    @classmethod
    def of(cls, words: WordWeights, most: float) -> Learned:
        table = words.table
        if table is None:
            return NO_LEARNED
        keep = table[1] > 1
        decisive = tuple(w for w, m in zip(words.words, words.multipliers.tolist()) if m > 1)
        return cls(table[0][keep], most * words.share(table[1][keep]), decisive)

    def shares(self, hashes: np.ndarray) -> np.ndarray:
        if not len(self.keys):
            return np.zeros(len(hashes))
        at = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
        return np.where(self.keys[at] == hashes, self.share[at], 0.0)


NO_LEARNED = Learned(np.zeros(0, np.uint64), np.zeros(0))


class MarkScan:
    """The lexicon's and the learned words as they appear in a text's characters, in
    order: one regular expression over the text, no tokenising. Two texts whose scans are
    equal hold the same decision words in the same order, so cannot decide apart at any
    spot but by rearranging the words around them ("A approved, B rejected" / "B
    approved, A rejected", which this does not call a change of decision): most pairs
    scored (true copies) are settled here, and only the others are tokenised, which for
    Chinese costs more than everything else a pair's scoring does. English words match
    whole; Chinese ones anywhere (不 in 不断 too: alike in both texts of a copy)."""

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        words = {*POSITIVE_ZH, *NEGATIVE_ZH, *NEGATORS_ZH, *POSITIVE_EN, *NEGATIVE_EN, *NEGATORS_EN, *extra}
        self.ascii = frozenset(w for w in words if w.isascii())
        # English words whole (kept where they are marks); the others through a trie of
        # their characters, so that a position fails on one character class at once.
        self.pattern = re.compile(r"[a-z0-9_']+|" + _trie_pattern(sorted(w for w in words if not w.isascii())))

    def __call__(self, text: str) -> tuple[str, ...]:
        found = self.pattern.findall(unicodedata.normalize("NFKC", text).casefold())
        return tuple(w for w in found if not w.isascii() or w in self.ascii)


@lru_cache(maxsize=4)
def mark_scan(learned: tuple[str, ...] = ()) -> MarkScan:
    """The scan of the lexicon and these learned words (one per learned model in use)."""
    return MarkScan(learned)


def _trie_pattern(words: list[str]) -> str:
    """A regular expression matching the longest of `words` at a position, as a trie."""
    if not words:
        return "(?!)"
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        ends = "" in node
        branches = [re.escape(ch) + walk(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if ends else body

    return walk(trie)


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9),
        np.uint64(0x27D4EB2F165667C5))


def _mix(*parts: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        keys = np.zeros(len(parts[0]), np.uint64)
        for part, k in zip(parts, _MIX):
            keys ^= part * k
        keys ^= keys >> np.uint64(31)
    return keys


def _gap_keys(frame: np.ndarray, gaps: np.ndarray, half: str = "") -> np.ndarray:
    """Keys of frame gaps (gap k sits after frame token k - 1; 0: before the first): the
    two frame tokens on each side, 0 past either end; `half` "left" or "right": the two
    on that side only."""
    padded = np.concatenate([np.zeros(2, np.uint64), frame, np.zeros(2, np.uint64)])
    if half == "left":
        return _mix(padded[gaps], padded[gaps + 1], np.ones(len(gaps), np.uint64))
    if half == "right":
        return _mix(np.full(len(gaps), 2, np.uint64), padded[gaps + 2], padded[gaps + 3])
    return _mix(padded[gaps], padded[gaps + 1], padded[gaps + 2], padded[gaps + 3])


@dataclass
class DecisionSpots:
    """One text's decision spots: its frame (the unmarked tokens) and its marked gaps,
    {key: (polarity, marked hashes)}. Every gap's key is made only when another text
    asks for a gap this one holds nothing in (`at`): most texts hold no marked word at
    all, and most pairs of texts that do hold the same ones at the same spots."""

    frame: np.ndarray
    marked: dict[int, tuple[int, tuple[int, ...]]]
    sides: dict[int, set[int]] = field(default_factory=dict)  # half key -> polarities there

    @cached_property
    def gaps(self) -> np.ndarray:
        return np.unique(_gap_keys(self.frame, np.arange(len(self.frame) + 1)))

    def at(self, key: int) -> tuple[int, tuple[int, ...]] | None:
        """(polarity, marked words) of this text at a frame gap: +1 and none for an empty
        gap it has; None where its frame lacks that gap."""
        found = self.marked.get(key)
        if found is not None:
            return found
        i = int(np.searchsorted(self.gaps, np.uint64(key)))
        return (1, ()) if i < len(self.gaps) and int(self.gaps[i]) == key else None

    @classmethod
    def of(cls, tokens: np.ndarray, lex: Lexicon, learned: Learned = NO_LEARNED) -> DecisionSpots:
        return spots_of(TokenBatch.from_arrays([np.asarray(tokens, np.uint64)]), lex, learned)[0]


def spots_of(batch: TokenBatch, lex: Lexicon, learned: Learned = NO_LEARNED) -> list[DecisionSpots]:
    """The decision spots of every text of a batch: lexicon and learned words looked up
    for the whole batch at once; per text, work only where it holds marked words."""
    hashes = batch.hashes
    sign = lex.signs(hashes)
    marked = (sign != 0) | (learned.shares(hashes) > 0)
    offsets = batch.offsets
    counts = np.add.reduceat(marked, offsets[:-1]) if len(hashes) else np.zeros(batch.n_docs, np.int64)
    counts = np.where(offsets[1:] > offsets[:-1], counts, 0)
    out = []
    for i in range(batch.n_docs):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        if not counts[i]:
            out.append(DecisionSpots(hashes[lo:hi], {}))
            continue
        m, tokens, sg = marked[lo:hi], hashes[lo:hi], sign[lo:hi]
        where = np.flatnonzero(m)
        gap = where - np.arange(len(where))  # marked token p lies after p - (marked before it) frame tokens
        frame = tokens[~m]
        uniq, first = np.unique(gap, return_index=True)
        keys = _gap_keys(frame, uniq)
        spots: dict[int, tuple[int, tuple[int, ...]]] = {}
        sides: dict[int, set[int]] = {}
        ends = np.append(first[1:], len(where))
        halves = zip(_gap_keys(frame, uniq, "left").tolist(), _gap_keys(frame, uniq, "right").tolist())
        for key, s, e, (left, right) in zip(keys.tolist(), first.tolist(), ends.tolist(), halves):
            at = where[s:e]
            polarity = int(np.prod(np.where(sg[at] == 0, 1, sg[at]).astype(np.int64)))
            spots[key] = (polarity, tuple(sorted(tokens[at].tolist())))
            if (sg[at] != 0).any():
                sides.setdefault(left, set()).add(polarity)
                sides.setdefault(right, set()).add(polarity)
        out.append(DecisionSpots(frame, spots, sides))
    return out


def decision_share(a: DecisionSpots, b: DecisionSpots, flip: float, learned: Learned) -> float:
    """The share of a pair's similarity its texts' decision spots take away: `flip` where
    one spot holds phrases of opposite polarity; else the largest share among learned
    words that differ at a spot where the lexicon does not vouch for both phrases."""
    if not a.marked and not b.marked:
        return 0.0
    if _opposite_beside(a, b):
        return flip
    share = 0.0
    for key in a.marked.keys() | b.marked.keys():
        x, y = a.at(key), b.at(key)
        if x is None or y is None or x[1] == y[1]:
            continue
        if x[0] != y[0]:
            return flip
        differ = np.fromiter(set(x[1]) ^ set(y[1]), np.uint64)
        # lexicon words among them: the lexicon found both phrases alike, whatever labels say
        unvouched = differ[lexicon().signs(differ) == 0]
        share = max(share, float(learned.shares(unvouched).max(initial=0.0)))
    return share


def _opposite_beside(a: DecisionSpots, b: DecisionSpots) -> bool:
    """Whether the two texts hold lexicon phrases of opposite polarity right after the
    same two frame words, or right before them: a spot whose frame changed on one side
    ("经研究，同意备案你单位" / "经研究，给予批准你单位") still decides apart. Only where
    each text holds one polarity beside those words."""
    for half, polarities in a.sides.items():
        theirs = b.sides.get(half)
        if theirs and len(polarities) == 1 and len(theirs) == 1 and polarities != theirs:
            return True
    return False
