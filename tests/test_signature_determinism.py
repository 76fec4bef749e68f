"""Every text signature (SimHash, MinHash, weighted MinHash) is a function of its document
and of the parameters its version names, nothing else: the same in another word order, in
another batch, in another order, under other chunk sizes and in another process; empty
documents are never duplicates of each other.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from mmdedup.extract import minhash as minhash_mod
from mmdedup.extract import simhash as simhash_mod
from mmdedup.extract import hashing as hashing_mod
from mmdedup.extract.minhash import EMPTY, MinHash, WeightedMinHash, jaccard
from mmdedup.extract.simhash import SIMHASH_VERSION, simhash64
from mmdedup.extract.hashing import HASH_VERSION, hash_tokens
from mmdedup.extract.tokenbatch import collapse_terms
from mmdedup.extract.tokens import tokenize_many, tokenizer_version

from sketch_helpers import PLATFORM, SIGNERS, zipf_docs


def all_signatures(docs: list[list[str]]) -> dict[str, np.ndarray]:
    batch = hash_tokens(docs)
    terms = collapse_terms(batch)
    # TF-IDF-like float weights, a function of the token only (as an idf table would be).
    tfidf = collapse_terms(batch.with_weights(((batch.hashes % np.uint64(997)).astype(np.float64) + 1) / 7.3))
    out = {"hashes": batch.hashes, "simhash": simhash64(batch), "simhash_tf": simhash64(terms),
           "simhash_tfidf": simhash64(tfidf), "expand_tfidf": WeightedMinHash(128)(tfidf),
           "icws_tfidf": WeightedMinHash(128, variant="icws")(tfidf)}
    for name, signer in SIGNERS.items():
        out[name] = signer(batch)
    return out


def test_signatures_ignore_word_order() -> None:
    rng = random.Random(3)
    sentences = [
        "the committee approved the budget for the new library",
        "heavy rain is expected across the northern region tonight",
        "local farmers reported a strong harvest this autumn",
        "北京市政府今天发布了新的交通管理规定",
        "研究人员发现了一种新的治疗方法",
    ]
    shuffled = sentences[:]
    while shuffled == sentences:
        rng.shuffle(shuffled)
    docs = tokenize_many([" ".join(sentences), " ".join(shuffled)])
    assert sorted(docs[0]) == sorted(docs[1]) and docs[0] != docs[1]
    sigs = all_signatures(docs)
    for name in ("simhash", "simhash_tf", "simhash_tfidf", "oph", "kperm", "expand", "icws", "0bit",
                 "expand_tfidf", "icws_tfidf"):
        assert np.array_equal(sigs[name][0], sigs[name][1]), name


def test_signature_of_a_document_does_not_depend_on_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = zipf_docs(5, 60, 700) + [[], ["lonely"], ["w"] * 5000]
    reference = all_signatures(docs)
    order = list(range(len(docs)))
    random.Random(1).shuffle(order)
    shuffled = all_signatures([docs[i] for i in order])
    for name, values in reference.items():
        if name == "hashes":
            continue
        assert np.array_equal(shuffled[name], values[order]), name
    single = all_signatures([docs[7]])
    for name in ("simhash", "simhash_tfidf", "oph", "kperm", "expand", "icws", "0bit", "expand_tfidf", "icws_tfidf"):
        assert np.array_equal(single[name][0], reference[name][7]), name
    # Tiny chunks everywhere: every "document longer than a chunk" path is taken.
    monkeypatch.setattr(hashing_mod, "_GROUP", 64)
    monkeypatch.setattr(simhash_mod, "_SLOTS_UNWEIGHTED", 64)
    monkeypatch.setattr(simhash_mod, "_SLOTS_WEIGHTED", 64)
    monkeypatch.setattr(minhash_mod, "_CHUNK_TOKENS", 50)
    monkeypatch.setattr(minhash_mod, "_CHUNK_CELLS", 128 * 37)
    monkeypatch.setattr(minhash_mod, "_GROUP_CHUNKS", 2)
    chunked = all_signatures(docs)
    for name, values in reference.items():
        assert np.array_equal(chunked[name], values), name


def test_empty_and_tiny_documents() -> None:
    docs = [[], ["单"], ["a", "b"], []]
    sigs = all_signatures(docs)
    assert sigs["simhash"][0] == 0 and sigs["simhash"][3] == 0
    for name in ("oph", "kperm", "expand", "icws", "0bit"):
        s = sigs[name]
        assert (s[0] == EMPTY).all() and (s[3] == EMPTY).all(), name
        assert (s[1] != EMPTY).all() and (s[2] != EMPTY).all(), name
        assert jaccard(s[0], s[3]) == 0.0  # two empty texts are not duplicates
        assert jaccard(s[1], s[1]) == 1.0
        assert jaccard(s[1], s[2]) < 0.2
    assert simhash64(hash_tokens([])).shape == (0,)
    assert MinHash(128)(hash_tokens([])).shape == (0, 128)


def test_versions_record_parameters() -> None:
    assert MinHash(64, seed=9, variant="kperm").version.startswith("minhash-kperm-p64-s9-")
    assert WeightedMinHash(32, seed=3, variant="0bit").version.startswith("wminhash-0bit-p32-s3-")
    assert MinHash(128).version != MinHash(128, seed=2).version
    assert HASH_VERSION in SIMHASH_VERSION and HASH_VERSION in MinHash(128).version
    assert WeightedMinHash(128).version.startswith("wminhash-expand-d1-c256-p128-s1-")
    assert WeightedMinHash(128, delta=0.5).version != WeightedMinHash(128).version
    seeds = [MinHash(128, seed=s)(hash_tokens([["a", "b", "c"]]))[0] for s in (1, 2)]
    assert not np.array_equal(*seeds)


# --- stability across processes -------------------------------------------------------

_DIGEST_SCRIPT = """
import hashlib, json, random, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from mmdedup.extract.minhash import MinHash, WeightedMinHash
from mmdedup.extract.simhash import simhash64
from mmdedup.extract.hashing import hash_tokens
from mmdedup.extract.tokenbatch import collapse_terms
from mmdedup.extract.tokens import tokenize_many, tokenizer_version
texts = json.loads(sys.stdin.read())
batch = hash_tokens(tokenize_many(texts))
terms = collapse_terms(batch)
out = {"tokenizer": tokenizer_version(), "hashes": batch.hashes, "simhash": simhash64(batch),
       "simhash_tf": simhash64(terms), "oph": MinHash(128)(batch),
       "kperm": MinHash(128, variant="kperm")(batch), "expand": WeightedMinHash(128)(terms),
       "icws": WeightedMinHash(128, variant="icws")(terms), "0bit": WeightedMinHash(128, variant="0bit")(terms)}
print(json.dumps({k: v if isinstance(v, str) else hashlib.sha256(v.tobytes()).hexdigest()
                  for k, v in out.items()}))
"""


_TEXTS = [
    "北京市政府今天发布了新的交通管理规定，自2024年5月1日起施行。",
    "The quick brown fox jumps over the lazy dog; the dog sleeps on.",
    "今天天气很好我们去公园玩",
    "",
    "混合 mixed 文本 text with numbers 3.14 and 1,000 条记录",
] * 3


def test_signatures_identical_in_another_process() -> None:
    digests = []
    for hash_seed in ("1", "4242"):  # Python's str hash differs; ours must not
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        run = subprocess.run(
            [sys.executable, "-c", _DIGEST_SCRIPT, str(PLATFORM)],
            input=json.dumps(_TEXTS), capture_output=True, text=True, env=env, timeout=300, check=True,
        )
        digests.append(json.loads(run.stdout.strip().splitlines()[-1]))
    assert digests[0] == digests[1]
    batch = hash_tokens(tokenize_many(_TEXTS))
    terms = collapse_terms(batch)
    here = {
        "tokenizer": tokenizer_version(),
        "hashes": batch.hashes, "simhash": simhash64(batch), "simhash_tf": simhash64(terms),
        "oph": MinHash(128)(batch), "kperm": MinHash(128, variant="kperm")(batch),
        "expand": WeightedMinHash(128)(terms), "icws": WeightedMinHash(128, variant="icws")(terms),
        "0bit": WeightedMinHash(128, variant="0bit")(terms),
    }
    here = {k: v if isinstance(v, str) else hashlib.sha256(v.tobytes()).hexdigest() for k, v in here.items()}
    assert here == digests[0]
