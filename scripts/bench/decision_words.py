"""Decision words: caught without labels by the lexicon, learned from a few labels, and
carried to notice templates nobody labelled.

A corpus of notices in four templates: two the reviewers label (a Chinese approval reply,
an English planning decision) and two they never see (a Chinese inspection report, an
English licensing notice). Each notice comes in pairs that differ only in the decision:

- lexicon decisions ("给予批准" / "不予批准", "同意备案" / "不同意备案", "approved" /
  "rejected", "shall be granted" / "shall not be granted"): the built-in lexicon must put
  them below medium from the first ingest;
- house decisions no lexicon holds ("评为甲级" / "评为丙级", "列入白名单" / "列入黑名单",
  "rated green" / "rated red", "low risk" / "high risk"): reviewers label a few TRAIN
  pairs distinct, `retrain` runs, and the UNSEEN templates' pairs must fall below medium.

True duplicates must keep their tier through it all: reposts with a new date, outlet and
editor's line; a repost that words the decision with a synonym of the same polarity
("准予批准" for "给予批准", "granted" for "approved"); punctuation width; a sentence dropped;
a boilerplate footer.

At most `--labels` labels are given: distinct on train pairs of the house decisions, two
duplicates on reposts. Printed: tiers before the retrain and after, per set.

    python scripts/bench/decision_words.py [--labels 10] [--test 24] [--seed 1]

What looking at decision spots costs: `--cost 2000` ingests 2,000 texts of 300 words
with four near copies each (every text in a scored pair, the worst case: each pair's
texts are read back and tokenised again) and prints the CPU time; run it on this commit
and on one before decision words to compare (`--zh`: Chinese texts, jieba's slower
tokenising).
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections import Counter

from mmdedup import Platform

ZH_ORGS = ["市发展和改革委员会", "市生态环境局", "市住房和城乡建设局", "市交通运输局", "市市场监督管理局",
           "市水务局", "市文化广电旅游局", "市卫生健康委员会", "市应急管理局", "市商务局"]
ZH_FIRMS = ["华兴建材有限公司", "东方物流股份有限公司", "青山食品有限公司", "远航船舶修造厂", "金桥房地产开发有限公司",
            "绿源环保科技有限公司", "长河水电站", "星光文化传媒有限公司", "恒通汽车销售服务有限公司", "博远医药有限公司",
            "海纳化工有限公司", "天润纺织有限公司", "鑫源矿业有限公司", "嘉禾农业发展有限公司"]
ZH_PROJECTS = ["年产十万吨水泥粉磨站扩建项目", "城东物流园区仓储设施建设", "食品生产许可延续", "码头岸线使用",
               "危险废物经营许可", "药品经营许可证换发", "户外广告设施设置", "民办幼儿园办学许可", "取水许可",
               "排污许可证核发", "临时占用城市道路", "建设用地规划许可"]
ZH_PLACES = ["城东新区", "河西工业园", "南山街道", "北湖片区", "高铁新城", "江北开发区", "西郊镇", "滨江路"]
ZH_FILL = ["经审查，申请材料齐全，符合法定形式。", "项目选址位于{place}，总投资约{money}万元。",
           "你单位应严格落实安全生产主体责任，加强日常管理。", "请你单位自收到本文之日起{days}日内办理相关手续。",
           "如对本决定不服，可在六十日内申请行政复议。", "专家评审会于{m}月{d}日召开，{k}名专家参加评审。",
           "项目用地面积{area}平方米，建筑面积{area2}平方米。", "请按照有关规定做好信息公开工作。"]
ZH_CHECKS = ["消防设施完好，疏散通道畅通。", "特种设备均在检验有效期内。", "危险化学品台账记录完整。",
             "从业人员持证上岗率达到百分之{pct}。", "现场抽查{n}个岗位，操作规程张贴到位。",
             "应急预案已于{m}月{d}日组织演练。", "排污口设置规范，在线监测数据正常。", "食品留样记录齐全，冷链温度达标。"]
EN_TOWNS = ["Ashford", "Brackley", "Colwick", "Dunmore", "Eastleigh", "Fenwick", "Greyhope", "Harlow",
            "Ilkley", "Jarrow", "Kesgrave", "Lydney"]
EN_APPS = ["a two-storey rear extension", "the change of use of a shop to a cafe", "a new vehicle access",
           "the felling of three protected oaks", "the conversion of a barn to two dwellings",
           "a telecommunications mast of 15 metres", "a solar farm on agricultural land",
           "a drive-through restaurant", "a skate park on the recreation ground"]
EN_FILL = ["The planning committee considered the application at its meeting on {day}.",
           "Objections were received from {n} neighbouring residents.",
           "The site lies within the {town} conservation area.",
           "The highways authority raised no objection subject to conditions.",
           "A flood risk assessment by {firm} was submitted with the application.",
           "Parking for {n} cars and {k} bicycles must be provided before first use.",
           "The case officer, {officer}, visited the site on {day}."]
EN_PREMISES = ["The Red Lion", "Kingfisher Cafe", "Northgate Takeaway", "The Old Bakery", "Harbour Fish Bar",
               "Station Kebab House", "Mill Street Deli", "The Crown Inn", "Lotus Garden", "Bridge End Bistro"]
EN_CHECKS = ["Inspectors visited the premises on {day} and spoke to the manager, {officer}.",
             "Fridge temperatures were recorded below five degrees throughout the visit.",
             "Staff training records were complete for {n} employees.",
             "The cleaning schedule was displayed and signed off daily.",
             "Allergen information was available for every dish on the menu.",
             "A pest control contract with {firm} was in place."]
EN_FIRMS = ["Hydro Consult", "Brook and Partners", "Meridian Engineering", "Castle Pest Services"]
EN_OFFICERS = ["Ms Carter", "Mr Dowd", "Dr Ellison", "Mrs Fairbairn", "Mr Gupta"]

LEXICON_ZH = [("给予批准", "不予批准"), ("准予许可", "不予许可"), ("同意备案", "不同意备案")]
LEXICON_EN = [("approved", "rejected"), ("shall be granted", "shall not be granted")]
HOUSE_ZH = [("评为甲级", "评为丙级"), ("列入白名单", "列入黑名单")]
HOUSE_EN = [("rated green", "rated red"), ("low risk", "high risk")]
SYNONYMS = [("给予批准", "准予批准", True), ("approved", "granted", False)]
OUTLETS_ZH = ["市政府网站", "新华网", "人民网", "本地日报", "晚报", "政务微博"]
OUTLETS_EN = ["Council website", "Gazette", "Evening Post", "Borough News", "Local Radio"]
EDITORS_ZH = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨帆"]
EDITORS_EN = ["J. Smith", "A. Patel", "M. Brown", "L. Green", "R. Khan"]


def _fill(rng: random.Random) -> dict:
    return {"place": rng.choice(ZH_PLACES), "money": rng.randrange(200, 9000) * 10, "days": rng.choice([15, 30, 60]),
            "m": rng.randrange(1, 13), "d": rng.randrange(1, 29), "k": rng.randrange(3, 9),
            "area": rng.randrange(1000, 90000), "area2": rng.randrange(1000, 90000), "pct": rng.randrange(80, 100),
            "n": rng.randrange(2, 60), "day": f"{rng.randrange(1, 28)} March", "town": rng.choice(EN_TOWNS),
            "firm": rng.choice(EN_FIRMS), "officer": rng.choice(EN_OFFICERS)}


def zh_reply(rng: random.Random, decision: str) -> str:
    """TRAIN template: an approval reply."""
    org, firm, project, fill = rng.choice(ZH_ORGS), rng.choice(ZH_FIRMS), rng.choice(ZH_PROJECTS), _fill(rng)
    s = [x.format(**fill) for x in rng.sample(ZH_FILL, 4)]
    return (f"{org}关于{firm}{project}的批复\n{firm}：\n你单位报送的《关于{project}的申请》收悉。{s[0]}{s[1]}"
            f"经研究，{decision}你单位{project}。{s[2]}{s[3]}\n{org}")


def zh_inspection(rng: random.Random, decision: str) -> str:
    """UNSEEN template: an inspection report; the decision sits in another frame."""
    org, firm, fill = rng.choice(ZH_ORGS), rng.choice(ZH_FIRMS), _fill(rng)
    s = [x.format(**fill) for x in rng.sample(ZH_CHECKS, 4)]
    return (f"关于{firm}安全生产专项检查情况的通报\n各有关单位：\n{fill['m']}月{fill['d']}日，{org}检查组对{firm}"
            f"开展了专项检查。{s[0]}{s[1]}{s[2]}综合检查情况，该单位本年度{decision}，"
            f"现予通报。{s[3]}\n{org}")


def en_planning(rng: random.Random, decision: str) -> str:
    """TRAIN template: a planning decision."""
    town, app, fill = rng.choice(EN_TOWNS), rng.choice(EN_APPS), _fill(rng)
    s = [x.format(**fill) for x in rng.sample(EN_FILL, 4)]
    return (f"{town} Borough Council. Notice of decision on the application for {app} at "
            f"{rng.randrange(1, 200)} Mill Lane. {s[0]} {s[1]} The application is {decision}. {s[2]} {s[3]}")


def en_licence(rng: random.Random, decision: str) -> str:
    """UNSEEN template: a food hygiene licensing notice."""
    town, shop, fill = rng.choice(EN_TOWNS), rng.choice(EN_PREMISES), _fill(rng)
    s = [x.format(**fill) for x in rng.sample(EN_CHECKS, 4)]
    return (f"{town} District Council, environmental health. Inspection outcome for {shop}, "
            f"{rng.randrange(1, 200)} High Street. {s[0]} {s[1]} Following the inspection the premises were "
            f"{decision} by the licensing panel. {s[2]} {s[3]}")


def repost(rng: random.Random, body: str, zh: bool) -> str:
    y, m, d, views = rng.randrange(2019, 2026), rng.randrange(1, 13), rng.randrange(1, 29), rng.randrange(100, 9999)
    if zh:
        return (f"发布时间：{y}年{m}月{d}日 来源：{rng.choice(OUTLETS_ZH)} 浏览次数：{views}\n{body}\n"
                f"（责任编辑：{rng.choice(EDITORS_ZH)}）")
    return f"Published {d}/{m}/{y} by {rng.choice(OUTLETS_EN)}, {views} views.\n{body}\nEdited by {rng.choice(EDITORS_EN)}."


def variant(rng: random.Random, text: str, kind: int) -> str:
    """A true duplicate: punctuation width, a sentence dropped (not the decision's), or a
    boilerplate footer."""
    if kind == 0:
        return text.replace("，", ",").replace("。", ".").replace("：", ":").replace(". ", ".  ")
    if kind == 1:
        sep = "。" if "。" in text else ". "
        parts = text.split(sep)
        spare = [i for i in range(1, len(parts) - 1) if not any(w in parts[i] for w in (
            "研究", "综合", "application is", "premises were"))]
        if spare:
            del parts[rng.choice(spare)]
        return sep.join(parts)
    return text + ("\n本网站所载文章仅供参考，转载请注明出处。" if "。" in text else
                   "\nThis notice is published for information only; please credit the council when reposting.")


def build(seed: int, n_labels: int, n_test: int) -> dict[str, list]:
    """Items and the pairs of each set (ids). The house decisions' train pairs are as
    many as the labels leave after two duplicate labels, each phrase in turn."""
    rng = random.Random(seed)
    items: list[dict] = []
    sets: dict[str, list[tuple[str, str]]] = {k: [] for k in (
        "house_train", "repost_train", "lexicon_unseen", "house_unseen", "lexicon_seen",
        "synonym_reposts", "reposts", "true_variants")}

    def add(text: str) -> str:
        items.append({"id": f"n{len(items)}", "text": text})
        return items[-1]["id"]

    def pair(make, yes: str, no: str) -> tuple[str, str]:
        s = rng.random()
        return add(make(random.Random(s), yes)), add(make(random.Random(s), no))

    house = [(zh_reply, p) for p in HOUSE_ZH] + [(en_planning, p) for p in HOUSE_EN]
    for i in range(max(0, n_labels - 2)):
        make, (yes, no) = house[i % len(house)]
        sets["house_train"].append(pair(make, yes, no))
    unseen_house = [(zh_inspection, p) for p in HOUSE_ZH] + [(en_licence, p) for p in HOUSE_EN]
    unseen_lexicon = [(zh_inspection, p) for p in LEXICON_ZH] + [(en_licence, p) for p in LEXICON_EN]
    seen_lexicon = [(zh_reply, p) for p in LEXICON_ZH] + [(en_planning, p) for p in LEXICON_EN]
    for i in range(n_test):
        for key, pool in (("house_unseen", unseen_house), ("lexicon_unseen", unseen_lexicon),
                          ("lexicon_seen", seen_lexicon)):
            make, (yes, no) = pool[i % len(pool)]
            sets[key].append(pair(make, yes, no))
    for i in range(2 + n_test):
        zh = i % 2 == 0
        make = (zh_reply, zh_inspection)[i // 2 % 2] if zh else (en_planning, en_licence)[i // 2 % 2]
        decision = rng.choice([p[0] for p in (LEXICON_ZH + HOUSE_ZH if zh else LEXICON_EN + HOUSE_EN)])
        body = make(random.Random(rng.random()), decision)
        key = "repost_train" if i < 2 else "reposts"
        sets[key].append((add(repost(rng, body, zh)), add(repost(rng, body, zh))))
    for i in range(n_test):
        yes, other, zh = SYNONYMS[i % 2]
        make = (zh_reply, zh_inspection)[i // 2 % 2] if zh else (en_planning, en_licence)[i // 2 % 2]
        s = rng.random()
        sets["synonym_reposts"].append((add(make(random.Random(s), yes)),
                                        add(repost(rng, make(random.Random(s), other), zh))))
    for i in range(n_test):
        zh = i % 2 == 0
        make = (zh_reply, zh_inspection)[i // 2 % 2] if zh else (en_planning, en_licence)[i // 2 % 2]
        decision = rng.choice([p[rng.randrange(2)] for p in (LEXICON_ZH + HOUSE_ZH if zh else LEXICON_EN + HOUSE_EN)])
        body = make(random.Random(rng.random()), decision)
        sets["true_variants"].append((add(body), add(variant(rng, body, i % 3))))
    return {"items": items, **sets}


def tiers_of(platform: Platform, pairs: list[tuple[str, str]]) -> list[str]:
    found = {frozenset((p["a"], p["b"])): p["tier"] for p in platform.pairs()}
    return [found.get(frozenset(p)) or "none" for p in pairs]


RANK = {"none": 0, "weak": 1, "medium": 2, "strong": 3}


def cost(families: int, zh: bool) -> None:
    """Ingest `families` texts with four near copies each; print the CPU time."""
    import time

    rng = random.Random(1)
    if zh:
        import jieba

        with open(jieba.get_dict_file().name, encoding="utf-8") as f:
            vocab = [line.split()[0] for line in f.read().split("\n")[:60000:7] if line]
    else:
        vocab = [f"w{i}" for i in range(6000)]
    sep = "" if zh else " "
    items = []
    for i in range(families):
        words = [rng.choice(vocab) for _ in range(300)]
        items.append({"id": f"o{i}", "text": sep.join(words)})
        for j in range(4):
            copy = list(words)
            for _ in range(6):
                copy[rng.randrange(len(copy))] = rng.choice(words)
            items.append({"id": f"v{i}-{j}", "text": sep.join(copy)})
    with tempfile.TemporaryDirectory() as home, Platform.open(home) as p:
        c0, w0 = time.process_time(), time.perf_counter()
        p.ingest(items)
        c, w = time.process_time() - c0, time.perf_counter() - w0
        print(f"{len(items)} texts ({'Chinese' if zh else 'English'}), {len(p.pairs())} pairs: "
              f"CPU {c:.1f} s, wall {w:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cost", type=int, default=0, help="time an ingest of this many families instead")
    ap.add_argument("--zh", action="store_true", help="with --cost: Chinese texts")
    ap.add_argument("--labels", type=int, default=10, help="labels given in all (two of them duplicates)")
    ap.add_argument("--test", type=int, default=24, help="pairs in each evaluated set")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", default=None)
    ap.add_argument("--show", action="store_true", help="print the pairs that miss")
    args = ap.parse_args()
    if args.cost:
        return cost(args.cost, args.zh)
    data = build(args.seed, args.labels, args.test)
    with tempfile.TemporaryDirectory() as home, Platform.open(home, args.db) as p:
        p.ingest(data["items"])
        before = {k: tiers_of(p, v) for k, v in data.items() if k != "items"}
        for a, b in data["house_train"]:
            p.label(a, b, duplicate=False, reviewer="bench")
        for a, b in data["repost_train"]:
            p.label(a, b, duplicate=True, reviewer="bench")
        report = p.retrain()
        after = {k: tiers_of(p, v) for k, v in data.items() if k != "items"}
    labels = len(data["house_train"]) + len(data["repost_train"])
    print(report.summary())
    print()
    print(f"{labels} labels ({len(data['house_train'])} distinct, {len(data['repost_train'])} duplicate), "
          f"{args.test} pairs a set, seed {args.seed}")
    print()
    print("| set | before retrain | after retrain |")
    print("|---|---|---|")

    def below(t: list[str]) -> str:
        return f"{sum(x in ('weak', 'none') for x in t) / len(t):.1%} below medium"

    for key, label in (("lexicon_seen", "lexicon decisions, labelled templates"),
                       ("lexicon_unseen", "lexicon decisions, unseen templates"),
                       ("house_unseen", "house decisions, unseen templates")):
        print(f"| {label} | {below(before[key])} | {below(after[key])} |")
    for key, label in (("synonym_reposts", "reposts wording the decision with a synonym"),
                       ("reposts", "reposts (date, outlet, editor)"),
                       ("true_variants", "punctuation, a sentence dropped, a footer")):
        kept = sum(RANK[y] >= RANK[x] for x, y in zip(before[key], after[key]))
        found = lambda t: f"{sum(x != 'none' for x in t) / len(t):.1%} found"  # noqa: E731
        print(f"| {label} | {found(before[key])} | {found(after[key])}, {kept} of {len(before[key])} "
              f"kept their tier |")
    print()
    for key in data:
        if key != "items":
            print(f"{key}: before {dict(Counter(before[key]))} after {dict(Counter(after[key]))}")
    if args.show:
        texts = {i["id"]: i["text"] for i in data["items"]}
        for key in ("house_unseen", "lexicon_unseen", "synonym_reposts", "true_variants", "reposts"):
            for (a, b), x, y in zip(data[key], before[key], after[key]):
                bad = (y in ("strong", "medium")) if "unseen" in key else RANK[y] < RANK[x]
                if bad:
                    print(f"--- {key}: {x} -> {y}\n{texts[a]}\n{texts[b]}")


if __name__ == "__main__":
    main()
