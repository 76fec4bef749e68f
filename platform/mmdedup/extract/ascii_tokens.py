"""`hash_texts`: the token hashes of texts, straight from their bytes where a text folds
to ASCII, without making a string of every token.

`hash_tokens(tokenize_many(texts))` makes a Python string of every token (str.split, the
stop-word filter) only for `hash_tokens` to join them into one buffer again, and
`tokenize` looks for links with a substring search per needle per text: most of the cost
of ingesting a text. `hash_texts` gets the same hashes from the folded texts' bytes: the
texts of a group back to back in one buffer, lowercased, links looked for, token byte
ranges found and hashed, stop words dropped by hash, each a few numpy calls over the
whole group. Texts that do not fold to ASCII (CJK needs jieba, other scripts Unicode's
classes) go through `tokenize`, and their hashes are spliced in. A test holds
`hash_texts` to `hash_tokens(tokenize_many(texts))`.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Sequence

import numpy as np

from .hashing import _hash_padded, hash_tokens, lanes64
from .normalize import _PUNCT_FOLD, _drop_links, _fold, _unmark
from .tokenbatch import TokenBatch, _offsets
from .tokens import _ASCII_CLASS, STOP_WORDS, tokenize

_U = np.uint64

# Characters `_fold` maps to ASCII whatever surrounds them: what NFKC makes of each is
# ASCII or punctuation, with no combining mark, and neither that nor any ASCII character
# is the second of a canonical composition pair, so in a text of ASCII and these NFKC has
# nothing to reorder or compose across characters (a test checks this against all of
# Unicode). Curly quotes and dashes are in most English prose: with this table such a text
# folds to ASCII with a str.replace per distinct character, where `_fold` (NFKC, a regex
# scan and a casefold of the whole str) costs ~40 us for 400 words.
_ASCII_FOLD = {
    char: _fold(char)
    for char in map(chr, sorted(set(_PUNCT_FOLD) | set(range(0xFF01, 0xFF5F))))
    if _fold(char).isascii() and not any(map(unicodedata.combining, unicodedata.normalize("NFKD", char)))
}
# The usual ones first: `in` costs ~0.3 us a text, finding which ones a text holds ~5.
_COMMON_FOLDS = [(c, _ASCII_FOLD[c]) for c in "\u2019\u201c\u201d\u2018\u2014\u2013\u2026\u00a0"]
_ASCII_BYTES = bytes(range(128))


def _unmarked_ascii(text: str) -> bytes | None:
    """`_unmark(text)`, folded as `_fold` does but for case and backticks (the group does
    those), as ASCII bytes; None if it does not fold to ASCII."""
    text = _unmark(text)
    if text.isascii():
        return text.encode("ascii")
    for char, ascii in _COMMON_FOLDS:
        if char in text:
            text = text.replace(char, ascii)
    if text.isascii():
        return text.encode("ascii")
    # The distinct other non-ASCII characters: the UTF-8 bytes less the ASCII ones, decoded.
    others = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES)
    for char in set(others.decode("utf-8", "surrogatepass")):
        ascii = _ASCII_FOLD.get(char)
        if ascii is None:
            return None
        text = text.replace(char, ascii)
    return text.encode("ascii")


# Byte codes of folded ASCII text: 1 alphanumeric, 2 one of . , : ' (in a token between two
# alphanumerics), 3 "/" or "@" (links), 0 the rest, which only separates tokens. One
# bytes.translate gives them; the few bytes coded 2 or 3 are then looked at one by one.
_BYTE_CODES = bytes(_ASCII_CLASS[c] or 3 * (chr(c) in "/@") for c in range(256))


def _group_bytes(group: list[bytes]) -> tuple[bytes, bytes]:
    """The texts lowercased and backticks made apostrophes (`_fold` of ASCII), a space
    before and after each, then 16 zero bytes (`_hash_padded`); and their byte codes."""
    data = b" ".join([b"", *group, bytes(16)]).lower()
    if b"`" in data:
        data = data.replace(b"`", b"'")
    return data, data.translate(_BYTE_CODES)


def _linked_texts(data: np.ndarray, special: np.ndarray, text_starts: np.ndarray) -> list[int]:
    """The texts holding "://", "www." or "@" (those `tokenize` takes links out of), from
    the positions of the buffer's . , : ' / @: a handful of bytes per text, where a search
    for each needle in each text reads all of it (~3 us for 400 words, a needle). (A
    position 1 or 2 looks back into the zero padding at the end: not a "w".)"""
    char = data[special]
    slash = (char == ord("/")) & (data[special - 1] == ord(":")) & (data[special + 1] == ord("/"))
    dot = (char == ord(".")) & (data[special - 1] == ord("w")) & (data[special - 2] == ord("w"))
    dot &= data[special - 3] == ord("w")
    found = special[(char == ord("@")) | slash | dot]
    if len(found) == 0:
        return []
    return np.unique(np.searchsorted(text_starts, found, side="right") - 1).tolist()


_IS_DIGIT = np.zeros(256, bool)
_IS_DIGIT[ord("0") : ord("9") + 1] = True


def _ascii_token_ranges(data: np.ndarray, codes: np.ndarray, special: np.ndarray):
    """The matches of `_WORD` in a `_group_bytes` buffer, in numpy: (starts, lens, merged),
    where the runs numbered `merged` are parts of the token before them, to be dropped.

    Tokens are runs of alphanumerics, glued by the marks (one of . , : ' between two
    alphanumerics) that `_WORD`'s left-to-right scan takes in. An apostrophe after a letter
    always is ("it's"), and a . , or : without a digit on both sides never is ("e.g"):
    those are settled before the runs are found. The rest, next to digits, need the runs
    around them (`_number_marks`).
    """
    alnum = codes == 1
    at = special[(codes[special] == 2) & alnum[special - 1] & alnum[special + 1]]
    if len(at):
        apostrophe = data[at] == ord("'")
        left_digit = _IS_DIGIT[data[at - 1]]
        alnum[at[apostrophe & ~left_digit]] = True
        at = at[left_digit & (apostrophe | _IS_DIGIT[data[at + 1]])]
    edges = np.flatnonzero(alnum[1:] != alnum[:-1])
    edges += 1
    starts = edges[0::2].copy()  # runs [start, start + len)
    lens = edges[1::2] - starts
    merged = _number_marks(data, edges, starts, lens, at) if len(at) else None
    return starts, lens, merged


def _number_marks(data: np.ndarray, edges: np.ndarray, starts: np.ndarray, lens: np.ndarray, at: np.ndarray):
    """Glues the runs (`edges`: [start, end, ...]) around the marks `at` as `_WORD` does,
    where a digit precedes each mark (and follows it, for . , :): the first run of a token
    gets the token's length, in place; returns the runs it took in.

    The scan is in `\\d+([.,:]\\d+)+` (a number) or in a word. A . , or : joins when the run
    before it is all digits and the run after starts with one, unless that run before ends
    a word joined by an apostrophe ("1'2.3" -> "1'2", "3"). An apostrophe joins unless the
    run before it is all digits and ends a number ("1.5's" -> "1.5", "s"). A number ends
    with its last digit ("1.5a" -> "1.5", "a"): a cut inside a run, which then starts
    there. The two "unless" make a mark depend on the one before, settled by iterating to
    the fixed point (the chains are short). A run may hold apostrophes glued already: then
    it is not all digits, which is what the scan makes of it too ("a'1.5" -> "a'1", "5").
    Lengths and starts change in place, so no array of every run is copied for a few marks.
    """
    apostrophe = data[at] == ord("'")
    i = np.searchsorted(edges, at)  # edges[i] == at ends the run before the mark
    left_digits, left_size = _digit_prefixes(data, edges[i - 1], at)
    right_digits, right_size = _digit_prefixes(data, at + 1, edges[i + 2])
    all_left = left_digits == left_size
    joins = apostrophe | (all_left & (right_digits > 0))
    block = np.zeros(len(at), dtype=bool)
    block[1:] = (i[1:] == i[:-1] + 2) & (apostrophe[1:] != apostrophe[:-1]) & (~apostrophe[1:] | all_left[1:])
    if block.any():
        candidate = joins
        while True:
            new = candidate.copy()
            new[1:] &= ~(block[1:] & joins[:-1])
            if np.array_equal(new, joins):
                break
            joins = new
    cut = joins & ~apostrophe & (right_digits < right_size)
    left = i // 2  # the run before each mark
    linked = left[joins & ~cut]  # runs glued to the next one, ascending
    heads = tails = linked
    if len(linked):  # chains of glued runs: the first takes the length of all
        step = np.flatnonzero(np.diff(linked) != 1)
        heads = linked[np.concatenate(([0], step + 1))]
        tails = linked[np.concatenate((step, [len(linked) - 1]))] + 1
        lens[heads] = starts[tails] + lens[tails] - starts[heads]
    if cut.any():  # the token holding the run before ends at the cut, the run after starts there
        before, after, point = left[cut], left[cut] + 1, at[cut] + 1 + right_digits[cut]
        head = before.copy()
        if len(tails):
            chain = np.minimum(np.searchsorted(tails, before), len(tails) - 1)
            ends_chain = tails[chain] == before
            head[ends_chain] = heads[chain[ends_chain]]
        end = starts[after] + lens[after]
        lens[head] = point - starts[head]
        starts[after] = point
        lens[after] = end - point
    return linked + 1


def _digit_prefixes(data: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How many digits each range [begin, end) of data starts with, and its length."""
    size = end - begin
    first = np.cumsum(size) - size
    local = np.arange(int(size.sum()), dtype=np.int64) - np.repeat(first, size)
    non_digit = ~_IS_DIGIT[data[np.repeat(begin, size) + local]]
    return np.minimum.reduceat(np.where(non_digit, local, np.repeat(size, size)), first), size


@lru_cache(maxsize=1)
def _stop_word_table():
    """The ASCII STOP_WORDS' hashes in a table indexed by some bits of the hash, no two in
    one slot.

    A hash then is a stop word's iff its slot's entry equals it: a gather and a compare
    per token, where np.isin sorts and a binary search takes ~7 steps. Empty slots hold a
    stop word's hash of another slot, which no hash of theirs can equal.
    """
    words = sorted(w.encode("ascii") for w in STOP_WORDS if w.isascii())
    hashes = np.array([lanes64(w) for w in words], dtype=np.uint64)
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    for bits in range(max(len(words) - 1, 1).bit_length(), 21):
        mask = _U((1 << bits) - 1)
        for shift in range(64 - bits + 1):
            slot = ((hashes >> _U(shift)) & mask).astype(np.intp)
            if len(np.unique(slot)) == len(slot):
                table = np.full(1 << bits, hashes[0], dtype=np.uint64)
                table[slot] = hashes
                table_lengths = np.full(1 << bits, lengths[0], dtype=np.uint8)
                table_lengths[slot] = lengths
                return _U(shift), mask, table, table_lengths, frozenset(words)
    raise AssertionError("no collision-free slot bits for the stop words")


def _stop_words(data: np.ndarray, starts: np.ndarray, lens: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Which tokens are stop words, exactly: the same hash and length as one is the same
    bytes up to 8 bytes (`lanes64` is a bijection there); longer ones are compared."""
    shift, mask, table, table_lengths, words = _stop_word_table()
    slot = (hashes >> shift) & mask
    slot = slot.astype(np.intp)
    stop = table[slot] == hashes
    stop &= table_lengths[slot] == lens
    for i in np.flatnonzero(stop & (lens > 8)).tolist():
        stop[i] = data[starts[i] : starts[i] + lens[i]].tobytes() in words
    return stop


# Bytes of text per group: temporaries of up to about a MiB (see `_GROUP`); smaller groups
# pay numpy's per-call cost (~100 calls a group) more often.
_TEXT_GROUP = 1 << 18


def hash_texts(texts: Sequence[str]) -> TokenBatch:
    """`hash_tokens(tokenize_many(texts))`, bit for bit, without token strings for texts
    that fold to ASCII (see the note above `_ASCII_FOLD`)."""
    texts = texts if isinstance(texts, list) else list(texts)
    counts = np.zeros(len(texts), dtype=np.int64)
    fast: list[np.ndarray] = []
    slow_ids: list[int] = []
    slow_tokens: list[list[str]] = []
    group: list[bytes] = []
    ids: list[int] = []
    size = 0
    for i, text in enumerate(texts):
        data = _unmarked_ascii(text)
        if data is None:
            slow_ids.append(i)
            slow_tokens.append(tokenize(text))
            continue
        group.append(data)
        ids.append(i)
        size += len(data) + 1
        if size >= _TEXT_GROUP:
            fast.append(_hash_ascii_group(group, ids, counts))
            group, ids, size = [], [], 0
    if group:
        fast.append(_hash_ascii_group(group, ids, counts))
    hashes = np.concatenate(fast) if fast else np.zeros(0, dtype=np.uint64)
    if slow_ids:
        slow = hash_tokens(slow_tokens)
        counts[slow_ids] = slow.lengths
        at_slow = np.zeros(len(texts), dtype=bool)
        at_slow[slow_ids] = True
        at_slow = np.repeat(at_slow, counts)
        spliced = np.empty(len(at_slow), dtype=np.uint64)
        spliced[~at_slow] = hashes
        spliced[at_slow] = slow.hashes
        hashes = spliced
    return TokenBatch(hashes, _offsets(counts))


def _hash_ascii_group(group: list[bytes], ids: list[int], counts: np.ndarray) -> np.ndarray:
    """Token hashes of `_unmarked_ascii` texts, stop words out, in order; counts[ids] set."""
    sizes = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
    text_starts = np.cumsum(sizes + 1) - sizes
    data, codes = _group_bytes(group)
    special = np.flatnonzero(np.frombuffer(codes, dtype=np.uint8) >= 2)
    linked = _linked_texts(np.frombuffer(data, dtype=np.uint8), special, text_starts)
    if linked:  # `_drop_links`, the new texts spliced in
        data_parts, code_parts, done = [], [], 0
        for j in linked:
            start, end = int(text_starts[j]), int(text_starts[j] + sizes[j])
            # `tokenize` collapses whitespace first (~40 us for 400 words), which changes no
            # token: no link pattern matches or looks behind/ahead for whitespace.
            text = _drop_links(data[start:end].decode("ascii")).encode("ascii")
            data_parts += [data[done:start], text]
            code_parts += [codes[done:start], text.translate(_BYTE_CODES)]
            sizes[j] = len(text)
            done = end
        data = b"".join([*data_parts, data[done:]])
        codes = b"".join([*code_parts, codes[done:]])
        text_starts = np.cumsum(sizes + 1) - sizes
        special = np.flatnonzero(np.frombuffer(codes, dtype=np.uint8) >= 2)
    data_np = np.frombuffer(data, dtype=np.uint8)
    starts, lens, merged = _ascii_token_ranges(data_np, np.frombuffer(codes, dtype=np.uint8), special)
    hashes = _hash_padded(data, starts, lens)
    drop = _stop_words(data_np, starts, lens, hashes)
    if merged is not None:
        drop[merged] = True
    # np.flatnonzero and a gather: indexing with a mask this random costs 3x as much.
    kept = np.flatnonzero(~drop)
    first = np.searchsorted(kept, np.searchsorted(starts, text_starts))  # of each text
    counts[ids] = np.diff(np.append(first, len(kept)))
    return hashes[kept]
