"""Short articles beside long side matter: different articles of one site must not pair.

Four synthetic news sites (two English, two Chinese), each with 40 short articles (80-200
English words; 150-350 Chinese characters) and, on every page, side matter as long as the
article or longer: a list of eight related articles of the site (title and a snippet of
its first words), two ad blocks from a pool of eight, a "most read" widget of six site
headlines and a weather line. The side matter is drawn anew for every page, so it changes
from one crawl to the next, while its items recur on many pages of the site. Two markup
styles per language:

    semantic  <article>, <aside>, <nav>, related list in <section class="related-posts">
    soup      divs only, class names that say nothing ("c3", "bx"), side blocks in the
              same column as the article, no <aside>/<nav>: trafilatura keeps much of it

Every article is crawled twice (crawl 1, crawl 2: the same text, side matter drawn again)
and one in three is reposted on a wire site of its language (another template, its own
side matter). Truth: pages of one article are duplicates; pages of different articles
never are. The pages go through the product as a crawler feeds it: crawl 1 as one ingest
and crawl 2 with the reposts as a second, `--chunk` pages a commit, the sites interleaved.

Measured on the pairs the product stores (`Platform.pairs`, tiers on the fused score):
false pairs between different articles of one site (medium+, and weak+), and recall of
the true duplicates at medium+ (the same article crawled again, and reposted). Methods:

    mmdedup now       this checkout
    mmdedup at REV    the product at each `--before` revision (by default the commit
                      before the side-matter work), the same pages and settings, in the
                      same run
    baseline          trafilatura.extract (defaults) + plain 64-bit SimHash of unweighted
                      tokens, Hamming <= 3 (no tiers: a match is a pair)

    python scripts/bench/web_side_matter.py [--seed 1] [--articles 40] [--chunk 25] [--before REV ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from html import escape
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ["b4a25b2"]  # the product before the side-matter work

# --------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------


def short_bodies(n: int, zh: bool, rng: random.Random) -> list[tuple[str, list[str]]]:
    """(title, paragraphs) of n short disjoint bodies: web_quality.py's, cut to 80-200
    English words or 150-350 Chinese characters."""
    sys.path.insert(0, str(Path(__file__).parent))
    from web_quality import en_bodies, zh_bodies

    out = []
    for title, paras in (zh_bodies if zh else en_bodies)(n, rng):
        size = (lambda p: len(p)) if zh else (lambda p: len(p.split()))
        lo, hi = (150, 350) if zh else (80, 200)
        target = rng.randint(lo, hi)
        kept, total = [], 0
        for p in paras:
            if total >= target:
                break
            if total + size(p) > hi:  # cut the paragraph at a sentence
                cut = p[: hi - total] if zh else " ".join(p.split()[: hi - total])
                p = cut.rstrip("，,;:") + ("。" if zh else ".")
            kept.append(p)
            total += size(p)
        out.append((title, kept))
    return out


EN_ADS = [
    "Advertisement. Switch to Bright Valley Energy today and save up to 200 pounds a year on your household "
    "bills. Fixed prices for two years, no exit fees, and a free smart thermostat for every new customer who "
    "joins before the end of the month. Terms and conditions apply.",
    "Sponsored. Book a weekend break on the coast from 59 pounds per night, breakfast included, with free "
    "cancellation until the day before arrival. Sea view rooms, a heated indoor pool and children under twelve "
    "stay free when sharing with two adults.",
    "Advertisement. The new Aurora hybrid hatchback: 60 miles per gallon, seven years warranty and zero percent "
    "finance on selected models this month. Visit your local dealer for a test drive and a free coffee.",
    "Promoted. Learn a new language in just ten minutes a day with the award-winning Lingo app. Over forty "
    "languages, lessons made by real teachers, and a streak counter that keeps you going. Start your free trial.",
    "Advertisement. Home insurance from 8 pounds a month. Compare quotes from over forty insurers in under two "
    "minutes and get a cinema ticket every week for a year when you buy through us.",
    "Sponsored. Fresh recipe boxes delivered to your door every week. Choose from thirty new dishes, skip or "
    "cancel any time, and get 60 percent off your first box with code FRESH60.",
    "Advertisement. Hearing aids that fit invisibly behind the ear. Book a free hearing test at one of our two "
    "hundred high street branches and try a pair at home for thirty days.",
    "Promoted. Your pension, all in one place. Combine your old workplace pensions in minutes and see what they "
    "could be worth when you retire. Capital at risk.",
]
ZH_ADS = [
    "广告：暑期特惠，海滨度假酒店双人套餐仅需六百九十九元，含早餐和景区门票，儿童免费入住，预订从速，名额有限，详情请致电客服热线。",
    "推广：新款智能手机今日开售，以旧换新最高补贴一千元，分期免息，购机即送无线耳机和一年碎屏保险，详询各大门店或官方商城。",
    "广告：专业装修公司，十年质保，免费上门量房设计，本月签约再送家电大礼包，老客户推荐新客户签约双方各得现金红包。",
    "推广：在线英语课程，外教一对一，首课免费体验，扫码即可报名，课程可随时预约和取消，学习报告每周发送给家长。",
    "广告：新楼盘火热认购中，地铁口精装三居，首付低至三成，周末到访售楼处即送精美礼品，更有购房优惠等您来拿。",
    "推广：生鲜电商平台新人专享，首单立减三十元，蔬菜水果当日采摘当日送达，满九十九元包邮，会员每周再享折扣。",
    "广告：少儿编程培训暑期班开课啦，小班教学，项目制学习，结课颁发证书，现在报名享受早鸟价八折优惠。",
    "推广：汽车保养套餐限时特惠，机油机滤更换加全车检测只需一百九十九元，预约到店还送洗车券三张。",
]
EN_WEATHER = "Weather today: {t} degrees, {w}, wind {v} mph. Tomorrow: {t2} degrees."
ZH_WEATHER = "今日天气：{w}，气温{t}度，风力{v}级。明日：{t2}度。"
EN_SKY = ["sunny", "light rain", "cloudy", "showers", "fog early"]
ZH_SKY = ["晴", "小雨", "多云", "阵雨", "雾转晴"]


class Site:
    """One site: a language, a markup style, its articles, and side matter drawn per page."""

    def __init__(self, key: str, name: str, zh: bool, style: str, articles: list[tuple[str, list[str]]]):
        self.key, self.name, self.zh, self.style, self.articles = key, name, zh, style, articles

    def snippet(self, i: int) -> str:
        text = " ".join(self.articles[i][1])
        return (text[:60] + "……") if self.zh else " ".join(text.split()[:35]) + " ..."

    def side(self, own: int, pool: list[int], rng: random.Random) -> dict:
        """The side matter of one page: drawn anew each time (changes between crawls)."""
        others = [i for i in pool if i != own]
        # "Latest" lists show the articles just before this one, "most read" a popular few:
        # neighbouring pages share much of their side matter.
        recent = [pool[(pool.index(own) - k) % len(pool)] for k in range(1, 13)]
        related = rng.sample(recent, 10)
        most = rng.sample(others[:8], 6)
        ads = rng.sample((ZH_ADS if self.zh else EN_ADS)[:4], 2)
        sky = rng.choice(ZH_SKY if self.zh else EN_SKY)
        t = rng.randint(3, 24)
        weather = (ZH_WEATHER if self.zh else EN_WEATHER).format(t=t, w=sky, v=rng.randint(1, 30), t2=t + rng.randint(-3, 3))
        return {"related": [(self.articles[i][0], self.snippet(i)) for i in related],
                "most": [self.articles[i][0] for i in most], "ads": ads, "weather": weather}

    def page(self, pid: str, art: tuple[str, list[str]], date: str, side: dict) -> str:
        return getattr(self, "_" + self.style)(pid, art[0], art[1], date, side)

    def _label(self, en: str, zh: str) -> str:
        return zh if self.zh else en

    def _semantic(self, pid, title, paras, date, side):
        e = escape
        body = "".join(f"<p>{e(p)}</p>" for p in paras)
        related = "".join(f'<li class="post-teaser"><h3><a href="/a/{k}">{e(t)}</a></h3><p>{e(s)}</p></li>'
                          for k, (t, s) in enumerate(side["related"]))
        most = "".join(f'<li><a href="/m/{k}">{e(t)}</a></li>' for k, t in enumerate(side["most"]))
        ads = "".join(f'<div class="ad-slot"><p>{e(a)}</p></div>' for a in side["ads"])
        return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{e(title)} | {e(self.name)}</title>
<meta property="og:title" content="{e(title)}"></head><body>
<header><a href="/">{e(self.name)}</a><nav><a href="/news">{self._label('News', '新闻')}</a> <a href="/sport">{self._label('Sport', '体育')}</a></nav></header>
<main><article class="post-{pid}"><h1>{e(title)}</h1><time datetime="{date}">{date}</time>
<div class="entry-content">{body}</div>
<section class="related-posts"><h2>{self._label('Read next', '相关阅读')}</h2><ul>{related}</ul></section>
</article>{ads}</main>
<aside><section class="widget"><h2>{self._label('Most read', '热点排行')}</h2><ol>{most}</ol></section>
<p class="weather">{e(side['weather'])}</p></aside>
<footer><p>{self._label('Copyright', '版权所有')} {e(self.name)}</p></footer></body></html>"""

    def _soup(self, pid, title, paras, date, side):
        e = escape
        body = "".join(f'<div class="tx">{e(p)}</div>' for p in paras)
        related = "".join(f'<div class="i"><div class="t"><a href="/a/{k}">{e(t)}</a></div><div class="s">{e(s)}</div></div>'
                          for k, (t, s) in enumerate(side["related"]))
        most = "".join(f'<div class="r"><a href="/m/{k}">{e(t)}</a></div>' for k, t in enumerate(side["most"]))
        ads = "".join(f'<div class="bx"><div class="tx">{e(a)}</div></div>' for a in side["ads"])
        return f"""<html><head><meta charset="utf-8"><title>{e(self.name)} - {e(title)}</title></head><body>
<div class="w"><div class="c1"><a href="/">{e(self.name)}</a></div>
<div class="c2"><div class="hd">{e(title)}</div><div class="dt">{date}</div>
<div class="bd">{body}</div>{ads}
<div class="c3"><div class="hd2">{self._label('You may also like', '猜你喜欢')}</div>{related}</div>
<div class="c4"><div class="hd2">{self._label('Most read', '热点排行')}</div>{most}<div class="tx">{e(side['weather'])}</div></div>
</div><div class="c5">{self._label('Copyright', '版权所有')} {e(self.name)}</div></div></body></html>"""

    def _wire(self, pid, title, paras, date, side):
        e = escape
        body = "".join(f"<p>{e(p)}</p>" for p in paras)
        most = "".join(f'<li><a href="/w/{k}">{e(t)}</a></li>' for k, t in enumerate(side["most"]))
        return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{e(title)}</title></head><body>
<div id="top"><b>{e(self.name)}</b></div><table><tr><td><div class="story"><h2>{e(title)}</h2><span>{date}</span>
{body}</div></td><td><div class="more"><ul>{most}</ul></div><div class="promo">{e(side['ads'][0])}</div></td></tr></table>
</body></html>"""


def corpus(seed: int, n: int, out: Path) -> tuple[list[dict], list[dict], dict[str, str], dict[str, str]]:
    """Writes the pages under `out`; (crawl-1 records, crawl-2 and repost records,
    page id -> article key, article key -> its text)."""
    rng = random.Random(seed)
    en = short_bodies(2 * n, False, rng)
    zh = short_bodies(2 * n, True, rng)
    sites = [Site("riverside.example", "Riverside Courier", False, "semantic", en[:n]),
             Site("citypost.example", "City Post", False, "soup", en[n:]),
             Site("jiangcheng.example", "江城晚报", True, "semantic", zh[:n]),
             Site("nanfang.example", "南方快讯", True, "soup", zh[n:])]
    wires = {False: Site("wirehub.example", "Wire Hub", False, "wire", en),
             True: Site("zhwire.example", "华文通讯", True, "wire", zh)}
    (out / "pages").mkdir(parents=True, exist_ok=True)
    truth: dict[str, str] = {}
    texts = {f"{s.key}/{i}": " ".join(s.articles[i][1]) for s in sites for i in range(n)}
    crawl1, crawl2 = [], []

    def emit(site: Site, pid: str, key: str, art, art_index: int, pool: list[int], records: list[dict]) -> None:
        date = f"2024-{1 + art_index % 12:02d}-{1 + art_index % 28:02d}"
        html = site.page(pid, art, date, site.side(art_index, pool, rng))
        (out / "pages" / f"{pid}.html").write_text(html, encoding="utf-8")
        records.append({"id": pid, "html": f"pages/{pid}.html",
                        "meta": {"url": f"https://{site.key}/{pid}", "article": key}})
        truth[pid] = key

    for i in range(n):  # crawl 1: the sites interleaved, article by article
        for s in sites:
            emit(s, f"{s.key.split('.')[0]}-{i}-c1", f"{s.key}/{i}", s.articles[i], i, list(range(n)), crawl1)
    for i in range(n):  # crawl 2: the same articles, side matter drawn again; reposts
        for k, s in enumerate(sites):
            emit(s, f"{s.key.split('.')[0]}-{i}-c2", f"{s.key}/{i}", s.articles[i], i, list(range(n)), crawl2)
            if i % 3 == 0:
                w = wires[s.zh]
                j = i + (n if k % 2 else 0)  # the article's index among the wire's bodies
                emit(w, f"{w.key.split('.')[0]}-{s.key.split('.')[0]}-{i}", f"{s.key}/{i}", s.articles[i], j,
                     list(range(2 * n)), crawl2)
    return crawl1, crawl2, truth, texts


def size(site: str, text: str) -> int:
    """Words of an English text, characters of a Chinese one."""
    if site in ("jiangcheng", "nanfang", "zhwire"):
        return len("".join(text.split()))
    return len(text.split())


# --------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------


def measure_product(src: Path, work: Path, chunk: int, tag: str) -> tuple[dict, float]:
    """Ingest both crawls with the product whose package is under `src` (a subprocess),
    and return its pairs (weak and above) and stored main texts, and the seconds it took."""
    home = work / f"home-{tag}"
    home.mkdir()
    (home / "config.toml").write_text(f"ingest_chunk = {chunk}\n")
    out = work / f"pairs-{tag}.json"
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--ingest", str(work), "--home", str(home), "--out", str(out)],
                   env=env, check=True)
    return json.loads(out.read_text()), time.perf_counter() - t0


def ingest_both(work: Path, home: Path, out: Path) -> None:
    from mmdedup import Platform

    with Platform.open(home) as platform:
        platform.ingest(work / "crawl1.jsonl")
        platform.ingest(work / "crawl2.jsonl")
        pairs = [{"a": p["a"], "b": p["b"], "score": p["score"], "tier": p["tier"], "signals": p["signals"]}
                 for p in (p.as_dict() if hasattr(p, "as_dict") else p for p in platform.pairs("weak"))]
        from sqlalchemy import text

        with platform.sessions() as session:
            texts = dict(session.execute(text("SELECT id, page_text FROM items")).all())
    out.write_text(json.dumps({"pairs": pairs, "texts": texts}))


def baseline_pairs(work: Path, records: list[dict]) -> list[dict]:
    """trafilatura.extract (defaults) -> plain SimHash, Hamming <= 3: every match a pair."""
    import trafilatura

    from mmdedup.extract.hashing import hash_tokens
    from mmdedup.extract.simhash import simhash64
    from mmdedup.extract.tokens import tokenize_many

    texts = [trafilatura.extract((work / r["html"]).read_text(encoding="utf-8")) or "" for r in records]
    sh = simhash64(hash_tokens(tokenize_many(texts, drop_stop_words=False)))
    x = sh[:, None] ^ sh[None, :]
    bits = np.unpackbits(x.view(np.uint8).reshape(len(sh), len(sh), 8), axis=2).sum(axis=2)
    i, j = np.nonzero(np.triu(bits <= 3, 1))
    return [{"a": records[a]["id"], "b": records[b]["id"], "tier": "strong", "score": 1.0, "signals": {}}
            for a, b in zip(i.tolist(), j.tolist())]


def site_of(pid: str) -> str:
    return pid.split("-")[0]


def figures(pairs: list[dict], truth: dict[str, str]) -> dict:
    ids = sorted(truth)
    dup = {(a, b) for k, a in enumerate(ids) for b in ids[k + 1:] if truth[a] == truth[b]}
    again = {p for p in dup if site_of(p[0]) == site_of(p[1])}
    repost = dup - again
    same_site_neg = sum(1 for k, a in enumerate(ids) for b in ids[k + 1:]
                        if site_of(a) == site_of(b) and truth[a] != truth[b])
    medium = {tuple(sorted((p["a"], p["b"]))) for p in pairs if p["tier"] in ("medium", "strong")}
    strong = {tuple(sorted((p["a"], p["b"]))) for p in pairs if p["tier"] == "strong"}
    weak = {tuple(sorted((p["a"], p["b"]))) for p in pairs}
    false = lambda found: {p for p in found if truth[p[0]] != truth[p[1]]}  # noqa: E731
    return {
        "false_medium_same_site": sum(site_of(a) == site_of(b) for a, b in false(medium)),
        "false_strong_same_site": sum(site_of(a) == site_of(b) for a, b in false(strong)),
        "false_weak_same_site": sum(site_of(a) == site_of(b) for a, b in false(weak)),
        "false_medium_all": len(false(medium)),
        "recall_medium": len(medium & dup) / len(dup),
        "recall_again": len(medium & again) / len(again),
        "recall_repost": len(medium & repost) / len(repost),
        "recall_strong": len(strong & dup) / len(dup),
        "dup": len(dup), "again": len(again), "repost": len(repost), "same_site_neg": same_site_neg,
    }


def text_scores(pairs: list[dict], truth: dict[str, str]) -> str:
    """Highest fused and text scores of different articles of one site."""
    neg = [p for p in pairs if truth[p["a"]] != truth[p["b"]] and site_of(p["a"]) == site_of(p["b"])]
    if not neg:
        return "none stored (all below the 0.5 floor)"
    fused = max(p["score"] for p in neg)
    text = max((p["signals"].get("text") or 0) for p in neg)
    return f"max fused {fused:.3f}, max text {text:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--articles", type=int, default=40, help="articles per site")
    ap.add_argument("--chunk", type=int, default=25, help="pages a commit (ingest_chunk)")
    ap.add_argument("--before", nargs="+", default=BEFORE,
                    help="git revisions of the product measured beside this checkout")
    ap.add_argument("--ingest", help=argparse.SUPPRESS)
    ap.add_argument("--home", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ingest:  # one product's run, in its own process (its own package on the path)
        ingest_both(Path(args.ingest), Path(args.home), Path(args.out))
        return

    with tempfile.TemporaryDirectory(prefix="side-matter-") as tmp:
        work = Path(tmp)
        crawl1, crawl2, truth, articles = corpus(args.seed, args.articles, work)
        for name, recs in (("crawl1", crawl1), ("crawl2", crawl2)):
            (work / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
        records = crawl1 + crawl2
        runs = {}
        for rev in args.before:
            src = work / f"src-{rev}"
            src.mkdir()
            tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "platform"],
                                 check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(src)], input=tar, check=True)
            runs[f"mmdedup at {rev}"] = measure_product(src / "platform", work, args.chunk, rev)
        runs["mmdedup now"] = measure_product(ROOT / "platform", work, args.chunk, "now")
        base = baseline_pairs(work, records)

        # Article, side matter and main text, per site.
        from mmdedup.extract import web

        words = Counter()
        for r in records:
            sig = web.extract_page((work / r["html"]).read_bytes(), max_bytes=1 << 24, max_chars=1 << 24,
                                   max_depth=200)
            site = site_of(r["id"])
            words[site, "extracted"] += size(site, sig.text)
            words[site, "article"] += size(site, articles[r["meta"]["article"]])
            for tag, (run, _) in runs.items():
                words[site, tag] += size(site, run["texts"].get(r["id"]) or "")
            words[site, "pages"] += 1

    f0 = figures(base, truth)
    print(f"## Short articles beside long side matter (seed {args.seed})\n")
    print(f"{len(records)} pages: 4 sites x {args.articles} articles x 2 crawls, one in three reposted on a wire "
          f"site; {f0['dup']} duplicate pairs ({f0['again']} crawled again, {f0['repost']} reposted), "
          f"{f0['same_site_neg']:,} pairs of different articles of one site. Ingested in two runs (crawl 1; "
          f"crawl 2 and reposts), {args.chunk} pages a commit.\n")
    sites = sorted({k[0] for k in words})
    print("Mean per page (words; characters on the Chinese sites): the article, the main text trafilatura "
          "(favor_precision) extracts, and the main text each product stored (signed).\n")
    print("| site | article | extracted | " + " | ".join(f"stored: {t}" for t in runs) + " |")
    print("|---|---|---|" + "---|" * len(runs))
    for site in sites:
        n = words[site, "pages"]
        print(f"| {site} | {words[site, 'article'] / n:.0f} | {words[site, 'extracted'] / n:.0f} | "
              + " | ".join(f"{words[site, t] / n:.0f}" for t in runs) + " |")
    print()
    print("| method | false pairs, different articles of one site: medium+ (strong) | weak+ | false medium+ overall "
          "| recall medium+ | crawled again | reposted | recall strong | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = [(tag, figures(run["pairs"], truth), f"{s:.1f}") for tag, (run, s) in runs.items()]
    rows.append(("baseline: trafilatura.extract + plain SimHash, Hamming <= 3", f0, "-"))
    for tag, f, secs in rows:
        print(f"| {tag} | {f['false_medium_same_site']} ({f['false_strong_same_site']}) | {f['false_weak_same_site']} "
              f"| {f['false_medium_all']} | {100 * f['recall_medium']:.1f}% | {100 * f['recall_again']:.1f}% "
              f"| {100 * f['recall_repost']:.1f}% | {100 * f['recall_strong']:.1f}% | {secs} |")
    print()
    for tag, (run, _) in runs.items():
        print(f"- {tag}: different articles of one site, {text_scores(run['pairs'], truth)}")
    print(f"\nCommand: `python scripts/bench/web_side_matter.py --seed {args.seed} --articles {args.articles} "
          f"--chunk {args.chunk} --before {' '.join(args.before)}`")


if __name__ == "__main__":
    main()
